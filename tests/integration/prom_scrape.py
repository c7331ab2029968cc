# SPDX-License-Identifier: BSD-3-Clause
"""Scrape rlockd's /metrics over a unix socket and parse it with the
Prometheus client library's own text parser (Debian: python3-prometheus-client).

    /usr/bin/python3 prom_scrape.py METRICS_SOCKET

Prints one sample per line, "name{label="value",...} value" with the labels
sorted, for the C test to compare with its workload. Exits 1 (and says why on
stderr) when the endpoint does not answer 200 with the Prometheus text type,
the parser refuses the text, or the families break the conventions rlockd
promises: rlockd_ names (and the standard process_ family), HELP on every family, counters' samples named
_total, histograms with cumulative buckets whose +Inf bucket equals _count.
"""
import http.client
import socket
import sys

from prometheus_client.parser import text_string_to_metric_families


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client speaking to a unix socket instead of host:port."""

    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


# The standard family every Prometheus exporter has, named as the client libraries name it
# (the parser strips a counter's _total).
PROCESS_FAMILIES = {"process_cpu_seconds", "process_resident_memory_bytes",
                    "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                    "process_start_time_seconds"}


def fail(msg):
    print("prom_scrape: " + msg, file=sys.stderr)
    sys.exit(1)


def labels_text(labels):
    return ",".join('%s="%s"' % (k, labels[k]) for k in sorted(labels))


def check_histogram(family):
    by_series = {}
    for s in family.samples:
        key = labels_text({k: v for k, v in s.labels.items() if k != "le"})
        by_series.setdefault(key, {"buckets": [], "count": None})
        if s.name.endswith("_bucket"):
            by_series[key]["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            by_series[key]["count"] = s.value
    if not by_series:
        fail("histogram %s has no samples" % family.name)
    for key, series in by_series.items():
        buckets = sorted(series["buckets"])
        if not buckets or buckets[-1][0] != float("inf"):
            fail("histogram %s{%s} has no +Inf bucket" % (family.name, key))
        values = [v for _, v in buckets]
        if values != sorted(values):
            fail("histogram %s{%s} buckets are not cumulative: %r" % (family.name, key, buckets))
        if series["count"] != values[-1]:
            fail("histogram %s{%s}: _count %r != +Inf bucket %r"
                 % (family.name, key, series["count"], values[-1]))


def main():
    if len(sys.argv) != 2:
        fail("usage: prom_scrape.py METRICS_SOCKET")
    conn = UnixHTTPConnection(sys.argv[1])
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read().decode("utf-8")
    except OSError as e:
        fail("GET /metrics: %s" % e)
    if resp.status != 200:
        fail("GET /metrics: status %d" % resp.status)
    ctype = resp.getheader("Content-Type", "")
    if not ctype.startswith("text/plain") or "version=0.0.4" not in ctype:
        fail("GET /metrics: Content-Type %r" % ctype)
    try:
        families = list(text_string_to_metric_families(body))
    except Exception as e:  # the parser's refusal, whatever its type
        fail("the Prometheus parser refused the exposition: %r" % e)
    if not families:
        fail("no metric families")
    out = []
    for f in families:
        if not f.name.startswith("rlockd_") and f.name not in PROCESS_FAMILIES:
            fail("family %s lacks the rlockd_ prefix" % f.name)
        if not f.documentation:
            fail("family %s has no HELP" % f.name)
        if f.type not in ("counter", "gauge", "histogram"):
            fail("family %s has type %s" % (f.name, f.type))
        if f.type == "histogram":
            check_histogram(f)
        for s in f.samples:
            if f.type == "counter" and not s.name.endswith(("_total", "_created")):
                fail("counter sample %s is not named _total" % s.name)
            labels = labels_text(s.labels)
            out.append("%s%s %r" % (s.name, "{%s}" % labels if labels else "", s.value))
    print("\n".join(out))


if __name__ == "__main__":
    main()
