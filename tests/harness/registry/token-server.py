#!/usr/bin/python3
"""The token service of the harness's third registry (127.0.0.1:5005), as
Docker Hub's auth.docker.io works: the registry answers 401 with
`WWW-Authenticate: Bearer realm=...,service=...,scope=...`; the client asks
this service for a token (GET with Basic credentials, or POST with an OAuth2
refresh token) and presents it. Tokens are RS256 JWTs whose x5c header
carries the certificate the registry trusts (config-token.yml).

    token-server.py PORT KEY CERT

Credentials: user podscope, password podscope-s3cret; refresh token
podscope-refresh. Anonymous requests get 401.
"""
import base64
import http.server
import json
import subprocess
import sys
import time
import urllib.parse
import uuid

PORT, KEY, CERT = int(sys.argv[1]), sys.argv[2], sys.argv[3]
USER, PASSWORD, REFRESH = "podscope", "podscope-s3cret", "podscope-refresh"
SERVICE, ISSUER = "podscope-test-registry", "podscope-test-issuer"


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def cert_der():
    pem = open(CERT).read()
    body = "".join(l for l in pem.splitlines() if "CERTIFICATE" not in l)
    return base64.b64decode(body)


def token(scope):
    access = []
    for s in filter(None, scope.split(" ")):
        kind, name, actions = s.split(":", 2) if s.count(":") >= 2 else (s, "", "")
        access.append({"type": kind, "name": name, "actions": actions.split(",")})
    now = int(time.time())
    header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(cert_der()).decode()]}
    claims = {"iss": ISSUER, "sub": USER, "aud": SERVICE, "exp": now + 600,
              "nbf": now - 10, "iat": now, "jti": str(uuid.uuid4()), "access": access}
    signing = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())).encode()
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", KEY], input=signing,
                         capture_output=True, check=True).stdout
    return signing.decode() + "." + b64url(sig)


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, doc):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        auth = self.headers.get("Authorization", "")
        ok = auth.startswith("Basic ") and base64.b64decode(auth[6:]).decode() == f"{USER}:{PASSWORD}"
        if not ok:
            return self.reply(401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad or no credentials"}]})
        t = token(" ".join(q.get("scope", [])))
        self.reply(200, {"token": t, "expires_in": 600})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(self.rfile.read(n).decode())
        if form.get("grant_type") != ["refresh_token"] or form.get("refresh_token") != [REFRESH]:
            return self.reply(401, {"error": "invalid_grant"})
        t = token(" ".join(form.get("scope", [])))
        self.reply(200, {"access_token": t, "expires_in": 600})

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
