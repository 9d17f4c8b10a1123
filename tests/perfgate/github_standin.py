"""A local stand-in for the GitHub issues API: the calls ``perfgate triage`` makes, in memory.

``GET /repos/O/R/issues`` (``labels``, ``state``, ``per_page``, ``page``; pull requests are
items too, as on GitHub), ``POST /repos/O/R/issues``, ``PATCH /repos/O/R/issues/N`` and
``POST /repos/O/R/issues/N/comments``. Every request must carry ``Authorization: Bearer TOKEN``
(else 401 Bad credentials); ``fail_with = code`` answers every request with that HTTP error.
Everything asked is logged in ``requests``.

The triage tests run it in a thread on 127.0.0.1 (:class:`Standin`), and so does
``lab.scripts.bisect_chain --triage`` on a GPU machine that has no network: point ``GITHUB_API_URL``
at :attr:`Standin.url`.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ISSUES = re.compile(r"/repos/([^/]+/[^/]+)/issues")
_ISSUE = re.compile(r"/repos/([^/]+/[^/]+)/issues/(\d+)")
_COMMENTS = re.compile(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments")


class Standin:
    """The stand-in server for one repository; a context manager that serves in a thread."""

    def __init__(self, repo: str = "perfgate/standin", token: str = "standin-token") -> None:
        self.repo, self.token = repo, token
        self.issues: list[dict[str, Any]] = []
        self.comments: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.fail_with: int | None = None
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Standin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def add_issue(self, title: str, body: str, labels=(), state="open", pull_request=False):
        """An issue (or pull request) that exists before the triage runs."""
        with self._lock:
            item = self._new(title, body, labels, state)
            if pull_request:
                item["pull_request"] = {"url": f"{self.url}/pulls/{item['number']}"}
            return item

    def _new(self, title: str, body: str, labels, state: str = "open") -> dict[str, Any]:
        number = len(self.issues) + 1
        item = {
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "labels": [{"name": name} for name in labels],
            "html_url": f"https://github.invalid/{self.repo}/issues/{number}",
        }
        self.issues.append(item)
        return item

    # -- the routes ------------------------------------------------------------------------------
    def answer(self, method: str, path: str, query: dict, body: Any) -> tuple[int, Any]:
        if self.fail_with is not None:
            return self.fail_with, {"message": "stand-in failure"}
        for pattern, routes in (
            (_COMMENTS, {"POST": self._comment}),
            (_ISSUE, {"PATCH": self._edit}),
            (_ISSUES, {"GET": self._list, "POST": self._create}),
        ):
            match = pattern.fullmatch(path)
            if match:
                if match.group(1) != self.repo:
                    return 404, {"message": "Not Found"}
                if method not in routes:
                    return 405, {"message": "Method Not Allowed"}
                return routes[method](*match.groups()[1:], query=query, body=body)
        return 404, {"message": "Not Found"}

    def _list(self, *, query: dict, body: Any) -> tuple[int, Any]:
        label, state = query.get("labels"), query.get("state", "open")
        per_page, page = int(query.get("per_page", 30)), int(query.get("page", 1))
        items = [
            i
            for i in self.issues
            if (label is None or label in [x["name"] for x in i["labels"]])
            and (state == "all" or i["state"] == state)
        ]
        return 200, items[(page - 1) * per_page : page * per_page]

    def _create(self, *, query: dict, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not body.get("title"):
            return 422, {"message": "Validation Failed: title"}
        return 201, self._new(body["title"], body.get("body") or "", body.get("labels") or ())

    def _edit(self, number: str, *, query: dict, body: Any) -> tuple[int, Any]:
        item = self._get(number)
        if item is None:
            return 404, {"message": "Not Found"}
        item.update({k: v for k, v in (body or {}).items() if k in ("title", "body", "state")})
        return 200, item

    def _comment(self, number: str, *, query: dict, body: Any) -> tuple[int, Any]:
        if self._get(number) is None:
            return 404, {"message": "Not Found"}
        comment = {
            "id": len(self.comments) + 1,
            "issue": int(number),
            "body": (body or {}).get("body", ""),
            "html_url": f"https://github.invalid/{self.repo}/issues/{number}#c{len(self.comments) + 1}",
        }
        self.comments.append(comment)
        return 201, comment

    def _get(self, number: str) -> dict[str, Any] | None:
        return next((i for i in self.issues if i["number"] == int(number)), None)


def _handler(standin: Standin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parts.query))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with standin._lock:
                standin.requests.append((self.command, self.path))
                if self.headers.get("Authorization") != f"Bearer {standin.token}":
                    status, answer = 401, {"message": "Bad credentials"}
                else:
                    try:
                        body = json.loads(raw) if raw else None
                    except ValueError:
                        status, answer = 400, {"message": "Problems parsing JSON"}
                    else:
                        status, answer = standin.answer(self.command, parts.path, query, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:  # the log is ``requests``
            pass

    return Handler
