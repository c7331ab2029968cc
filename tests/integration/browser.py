#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A real headless Chromium, driven through chromedriver (W3C WebDriver), for
the status page's test (test_status_page.c, harness_browser.c).

Reads one command per line on stdin and answers each with one line on stdout,
"ok VALUE" or "err WHY" (newlines in VALUE or WHY become spaces):

  open URL               load URL, wait until the document is loaded
  js EXPR                the value of the JavaScript expression EXPR: a string as
                         it is, anything else as JSON
  until MS EXPR          evaluate EXPR every 50 ms until it is truthy (its value),
                         at most MS milliseconds ("err timeout: ..." with the last)
  type CSS TEXT          type TEXT into the first element matching CSS
  click CSS              click the first element matching CSS
  shot PATH              save a screenshot of the window as PNG at PATH
  quit                   end the browser and this script

Arguments: DIR (for chromedriver's log and the browser's profile). Run it
as the leader of a process group of its own: at quit, at the end of stdin and
on SIGTERM it kills that group, Chromium's helpers included. The
browser runs with --no-sandbox (tests run as root) and without network
access beyond what the page asks of 127.0.0.1.
"""
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    def __init__(self, workdir):
        self.port = free_port()
        log = open(os.path.join(workdir, "chromedriver.log"), "w")
        self.proc = subprocess.Popen(
            ["/usr/bin/chromedriver", "--port=%d" % self.port],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                if self.call("GET", "/status")["ready"]:
                    break
            except (OSError, urllib.error.URLError):
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromedriver did not start (see chromedriver.log)")
            time.sleep(0.1)
        opts = {"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         "--disable-extensions", "--disable-background-networking",
                         "--disable-sync", "--window-size=1280,900", "--lang=en-US",
                         "--user-data-dir=" + os.path.join(workdir, "profile")]}
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": opts,
                                                 "pageLoadStrategy": "normal"}}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                return json.loads(res.read())["value"]
        except urllib.error.HTTPError as e:
            value = json.loads(e.read()).get("value", {})
            raise RuntimeError("%s: %s" % (value.get("error"), value.get("message", "")))

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.session, path), body)

    def js(self, expr):
        return self.s("POST", "/execute/sync", {"script": "return (%s);" % expr, "args": []})

    def element(self, css):
        return self.s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def quit(self):
        try:
            self.s("DELETE", "")
        finally:
            self.proc.terminate()
            self.proc.wait(10)


def show(value):
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace("\n", " ").replace("\r", " ")


def run(d, line):
    cmd, _, rest = line.partition(" ")
    if cmd == "open":
        d.s("POST", "/url", {"url": rest})
        return ""
    if cmd == "js":
        return show(d.js(rest))
    if cmd == "until":
        ms, _, expr = rest.partition(" ")
        deadline = time.time() + int(ms) / 1000
        while True:
            value = d.js(expr)
            if value:
                return show(value)
            if time.time() > deadline:
                raise RuntimeError("timeout: %s is still %s" % (expr, show(value)))
            time.sleep(0.05)
    if cmd == "type":
        css, _, text = rest.partition(" ")
        d.s("POST", "/element/%s/value" % d.element(css), {"text": text})
        return ""
    if cmd == "click":
        d.s("POST", "/element/%s/click" % d.element(rest), {})
        return ""
    if cmd == "shot":
        png = base64.b64decode(d.s("GET", "/screenshot"))
        with open(rest, "wb") as f:
            f.write(png)
        return str(len(png))
    raise RuntimeError("unknown command %r" % cmd)


def end_all(*_):
    """This script leads a process group of its own (harness_browser.c): chromedriver and
    every Chromium process are in it, and go with it."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.killpg(0, signal.SIGKILL)


def main():
    # The test process that started this one ended (PR_SET_PDEATHSIG): end everything.
    signal.signal(signal.SIGTERM, end_all)
    try:
        d = Driver(sys.argv[1])
    except Exception as e:  # said on the protocol's first line
        print("err cannot start the browser: %s" % show(str(e)), flush=True)
        return 1
    print("ok ready", flush=True)
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line == "quit":
            break
        try:
            print("ok " + run(d, line), flush=True)
        except Exception as e:
            print("err " + show(str(e)), flush=True)
    try:
        d.quit()
    finally:
        print("ok bye", flush=True)
        end_all()  # Chromium's helpers too, which outlive chromedriver
    return 0


if __name__ == "__main__":
    sys.exit(main())
