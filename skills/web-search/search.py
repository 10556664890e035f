"""web-search: one query to the SearXNG instance the person configured, as JSON.

The sandbox has no network: the request is a CONNECT through the proxy the core gives
this run (CARAPACE_PROXY), whose relay allows only the configured instance's host.
SKILL_WEB_SEARCH_API_KEY, when set, is sent as a bearer token (an instance behind an
authenticating proxy). The answer is one JSON object on stdout; a failure is
{"error": {...}}, exit 2.
"""
import http.client
import json
import os
import socket
import sys
import time
import urllib.parse

MAX_BYTES = 2_000_000
TIMEOUT_S = 20


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def get(url, headers):
    parts = urllib.parse.urlsplit(url)
    proxy_host, _, proxy_port = os.environ.get("CARAPACE_PROXY", "").rpartition(":")
    if not proxy_host:
        raise Failure("CONNECT_FAILED", "this run has no relay")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    started = time.time()
    while True:
        conn = kind(proxy_host, int(proxy_port), timeout=TIMEOUT_S)
        conn.set_tunnel(parts.hostname, port)
        try:
            conn.request("GET", urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, "")), headers=headers)
            break
        except ConnectionRefusedError:
            # The forwarder starts with the sandbox: give it a moment on the first run.
            if time.time() - started > 5:
                raise Failure("CONNECT_FAILED", "the relay's forwarder did not answer")
            time.sleep(0.1)
        except OSError as err:
            if "Tunnel connection failed: 403" in str(err):
                raise Failure("HOST_NOT_ALLOWED", f"{parts.hostname} is not the search service this skill may reach")
            raise Failure("CONNECT_FAILED", str(err))
    res = conn.getresponse()
    body = res.read(MAX_BYTES + 1)
    conn.close()
    if len(body) > MAX_BYTES:
        raise Failure("BAD_ANSWER", f"the answer is larger than {MAX_BYTES} bytes")
    return res, body


def main(argv):
    if not argv:
        raise Failure("BAD_QUERY", "usage: search.py QUERY [--page N]")
    query = argv[0]
    settings = json.loads(os.environ.get("CARAPACE_SKILL_SETTINGS") or "{}")
    page = int(argv[argv.index("--page") + 1]) if "--page" in argv else 1
    base = argv[argv.index("--url") + 1] if "--url" in argv else settings.get("searxng_url")
    if not base:
        raise Failure("NOT_CONFIGURED", "no search service: the person sets skills.web-search.searxng_url in carapace.json")
    params = {"q": query, "format": "json", "pageno": page}
    if settings.get("language"):
        params["language"] = settings["language"]
    url = base.rstrip("/") + "/search?" + urllib.parse.urlencode(params)
    headers = {"Accept": "application/json", "User-Agent": "Carapace-web-search/1"}
    key = os.environ.get("SKILL_WEB_SEARCH_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        res, body = get(url, headers)
    except socket.timeout:
        raise Failure("TIMEOUT", f"the search service did not answer within {TIMEOUT_S} s")
    if res.status != 200:
        raise Failure("HTTP_ERROR", f"the search service answered {res.status} {res.reason} (is its JSON format enabled?)")
    try:
        data = json.loads(body)
    except ValueError:
        raise Failure("BAD_ANSWER", "the search service did not answer JSON")
    results = [
        {"title": str(r.get("title", ""))[:300], "url": str(r.get("url", ""))[:2000], "snippet": str(r.get("content", ""))[:1000]}
        for r in (data.get("results") or [])[: settings.get("max_results", 8)]
        if isinstance(r, dict)
    ]
    return {"query": query, "source": "searxng", "number_of_results": data.get("number_of_results"), "results": results}


if __name__ == "__main__":
    try:
        print(json.dumps(main(sys.argv[1:]), ensure_ascii=False))
    except Failure as failure:
        print(json.dumps({"error": {"code": failure.code, "message": str(failure)}}, ensure_ascii=False))
        sys.exit(2)
    except (OSError, http.client.HTTPException, ValueError) as err:
        print(json.dumps({"error": {"code": "CONNECT_FAILED", "message": f"{type(err).__name__}: {err}"}}, ensure_ascii=False))
        sys.exit(2)
