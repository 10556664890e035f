"""fetch: one URL through the skill's relay, as text.

The sandbox has no network: every connection is a CONNECT through the proxy the core
gives this run (CARAPACE_PROXY, the relay's forwarder), which checks the host, and for a
name resolves it and refuses any address that is not public unicast. Each redirect is a
new CONNECT, so it is checked again. Bounded: bytes read, characters of text, redirects
and time. The answer is one JSON object on stdout; a failure is {"error": {...}}, exit 2.
"""
import html.parser
import http.client
import json
import os
import re
import socket
import ssl
import sys
import time
import urllib.parse

MAX_REDIRECTS = 5
SKIPPED = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
BLOCKS = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "br", "hr", "tr", "table",
          "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "form", "figure", "figcaption", "li",
          "h1", "h2", "h3", "h4", "h5", "h6", "td", "th"}


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Reader(html.parser.HTMLParser):
    """The text a reader sees: hidden parts left out, blocks on their own lines."""

    def __init__(self, base):
        super().__init__(convert_charrefs=True)
        self.base = base
        self.parts = []
        # A hidden element being skipped: its tag, and how deep in elements of that tag.
        self.skip_tag = None
        self.skip = 0
        self.title = None
        self.in_title = False
        self.links = []
        self.link = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "title":
            self.in_title = True
            self.title = ""
        if self.skip:
            if tag == self.skip_tag:
                self.skip += 1
            return
        if tag not in VOID and (tag in SKIPPED or "hidden" in attrs or attrs.get("aria-hidden") == "true" or re.search(r"display\s*:\s*none", attrs.get("style") or "")):
            self.skip_tag = tag
            self.skip = 1
            return
        if tag in BLOCKS:
            self.parts.append("\n")
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.parts.append("#" * int(tag[1]) + " ")
        if tag == "li":
            self.parts.append("- ")
        if tag == "a" and attrs.get("href"):
            self.link = {"text": "", "url": urllib.parse.urljoin(self.base, attrs["href"])}

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        if self.skip:
            if tag == self.skip_tag:
                self.skip -= 1
            return
        if tag in BLOCKS:
            self.parts.append("\n")
        if tag == "a" and self.link is not None:
            if len(self.links) < 50 and self.link["url"].startswith(("http://", "https://")):
                self.link["text"] = " ".join(self.link["text"].split())[:200]
                self.links.append(self.link)
            self.link = None

    def handle_data(self, data):
        if self.in_title:
            self.title += data
            return
        if self.skip:
            return
        self.parts.append(data)
        if self.link is not None:
            self.link["text"] += data

    def text(self):
        lines = [" ".join(line.split()) for line in "".join(self.parts).split("\n")]
        out, blank = [], False
        for line in lines:
            if line:
                out.append(line)
                blank = False
            elif not blank and out:
                out.append("")
                blank = True
        return "\n".join(out).strip()


def proxy():
    value = os.environ.get("CARAPACE_PROXY", "")
    host, _, port = value.rpartition(":")
    if not host:
        raise Failure("NO_NETWORK", "this run has no relay (the skill declares no network)")
    return host, int(port)


def tunnel(host, port, deadline):
    """A socket to host:port through the relay, or a Failure with the relay's code."""
    proxy_host, proxy_port = proxy()
    # The forwarder starts with the sandbox: give it a moment on the first run.
    while True:
        try:
            sock = socket.create_connection((proxy_host, proxy_port), timeout=max(1, deadline - time.time()))
            break
        except ConnectionRefusedError:
            if time.time() > min(deadline, START + 5):
                raise Failure("CONNECT_FAILED", "the relay's forwarder did not answer")
            time.sleep(0.1)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
        if len(head) > 65536:
            break
    status_line, _, rest = head.partition(b"\r\n")
    parts = status_line.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if status == 200:
        return sock
    headers, _, body = rest.partition(b"\r\n\r\n")
    code = "CONNECT_FAILED"
    for line in headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-carapace-refused":
            code = value.strip().decode("ascii", "replace")
    try:
        while len(body) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            body += chunk
    except OSError:
        pass
    sock.close()
    words = body.decode("utf-8", "replace").strip().split("\n")[0] or status_line.decode("latin-1")
    raise Failure(code, words[len(code) + 2:] if words.startswith(code + ": ") else words)


def one_hop(url, max_bytes, deadline):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Failure("BAD_URL", f"only http and https URLs with a host: {url[:200]}")
    if parts.username or parts.password:
        raise Failure("BAD_URL", "a URL with credentials in it is not fetched")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    sock = tunnel(parts.hostname, port, deadline)
    sock.settimeout(max(1, deadline - time.time()))
    if parts.scheme == "https":
        try:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
        except (ssl.SSLError, OSError) as err:
            raise Failure("TLS_FAILED", f"{parts.hostname}: {err}")
    conn = http.client.HTTPConnection(parts.hostname, port, timeout=max(1, deadline - time.time()))
    conn.sock = sock
    path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    conn.request("GET", path, headers={"Host": parts.netloc.rpartition("@")[2], "User-Agent": "Carapace-fetch/1", "Accept": "text/html,text/plain,application/json,*/*;q=0.5", "Accept-Encoding": "identity", "Connection": "close"})
    res = conn.getresponse()
    body = b""
    truncated = False
    while True:
        if time.time() > deadline:
            raise Failure("TIMEOUT", "the page did not arrive in time")
        chunk = res.read(65536)
        if not chunk:
            break
        body += chunk
        if len(body) > max_bytes:
            body = body[:max_bytes]
            truncated = True
            break
    conn.close()
    return res, body, truncated


def decode(body, content_type):
    m = re.search(r"charset=([\w.-]+)", content_type or "", re.I) or re.search(rb'<meta[^>]+charset=["\']?([\w.-]+)', body[:4096], re.I)
    charset = m.group(1) if m else "utf-8"
    if isinstance(charset, bytes):
        charset = charset.decode("ascii", "replace")
    try:
        return body.decode(charset, "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


def option(args, name, default, cast=int):
    if name in args:
        i = args.index(name)
        if i + 1 >= len(args):
            raise Failure("BAD_URL", f"{name} needs a value")
        return cast(args[i + 1])
    return default


def main(argv):
    if not argv:
        raise Failure("BAD_URL", "usage: fetch.py URL [--max-bytes N] [--max-chars N] [--timeout S] [--save NAME]")
    url = argv[0]
    max_bytes = min(option(argv, "--max-bytes", 2_000_000), 8_000_000)
    max_chars = option(argv, "--max-chars", 40_000)
    deadline = START + min(option(argv, "--timeout", 30, float), 120)
    save = option(argv, "--save", None, str)
    if save is not None and (not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", save) or save.startswith(".")):
        raise Failure("BAD_URL", "--save: a plain file name (letters, digits, . _ -)")
    redirects = []
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            res, body, truncated = one_hop(current, max_bytes, deadline)
        except socket.timeout:
            raise Failure("TIMEOUT", f"{current[:200]} did not answer in time")
        if res.status in (301, 302, 303, 307, 308) and res.getheader("Location"):
            nxt = urllib.parse.urljoin(current, res.getheader("Location"))
            redirects.append({"status": res.status, "to": nxt[:500]})
            current = nxt
            continue
        break
    else:
        raise Failure("TOO_MANY_REDIRECTS", f"more than {MAX_REDIRECTS} redirects")
    content_type = res.getheader("Content-Type") or ""
    answer = {"url": url, "final_url": current, "status": res.status, "content_type": content_type, "bytes": len(body), "redirects": redirects, "truncated": truncated}
    if save is not None:
        with open(os.path.join(os.environ.get("OUT", "/out"), save), "wb") as f:
            f.write(body)
        answer["saved"] = save
    if "html" in content_type.lower() or (not content_type and body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))):
        reader = Reader(current)
        reader.feed(decode(body, content_type))
        reader.close()
        text = reader.text()
        answer["title"] = " ".join((reader.title or "").split())[:300]
        answer["links"] = reader.links
    elif content_type.lower().startswith(("text/", "application/json", "application/xml")) or content_type.lower().endswith(("+json", "+xml")):
        text = decode(body, content_type)
    else:
        text = ""
        answer["note"] = "not text: use --save NAME to keep the file"
    if len(text) > max_chars:
        text = text[:max_chars]
        answer["truncated"] = True
    answer["text"] = text
    if res.status >= 400:
        answer["error"] = {"code": "HTTP_ERROR", "message": f"the server answered {res.status} {res.reason}"}
    return answer


START = time.time()
if __name__ == "__main__":
    try:
        result = main(sys.argv[1:])
        print(json.dumps(result, ensure_ascii=False))
        sys.exit(2 if "error" in result else 0)
    except Failure as failure:
        print(json.dumps({"error": {"code": failure.code, "message": str(failure)}}, ensure_ascii=False))
        sys.exit(2)
    except (OSError, http.client.HTTPException, ValueError) as err:
        print(json.dumps({"error": {"code": "CONNECT_FAILED", "message": f"{type(err).__name__}: {err}"}}, ensure_ascii=False))
        sys.exit(2)
