"""The few GitHub REST calls ``perfgate triage`` makes, with the standard library's urllib.

One issue per culprit, found again by a hidden marker in its body (:func:`publish`):

- ``GET /repos/{repo}/issues?labels=perfgate-triage&state=all`` (paged): the triage's issues,
  open or closed; the one whose body holds the marker is the culprit's. Decision: the list API,
  not the search API, because search is indexed with a delay and a rerun right after a first
  triage would not find the issue it opened, and open a second.
- ``POST /repos/{repo}/issues``: a new issue, labelled ``perfgate-triage``;
- ``PATCH /repos/{repo}/issues/{number}``: a rerun replaces the body with the newest triage;
- ``POST /repos/{repo}/issues/{number}/comments``: and says so in a comment, so that the people
  watching the issue hear of it. A closed issue is commented on, not reopened: someone closed it.

The base URL is ``GITHUB_API_URL`` (Actions sets it; https://api.github.com otherwise), so that a
test or a machine without network points it at a local stand-in (tests/perfgate/github_standin.py). The
token is sent as ``Authorization: Bearer``; nothing else is read from the environment here.
Every failure is :class:`GitHubError`, one line naming the call.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
LABEL = "perfgate-triage"
TIMEOUT_S = 30
PER_PAGE = 100
MAX_PAGES = 50  # 5000 triage issues: a repository with more has another problem
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


class GitHubError(Exception):
    """A GitHub API call that failed; the message is one line naming it."""


@dataclass(frozen=True)
class Issue:
    number: int
    url: str  # html_url: where a person reads it
    state: str  # open or closed
    body: str


@dataclass(frozen=True)
class Published:
    issue: Issue
    action: str  # "opened" or "updated"


def check_repo(repo: str) -> str:
    """``repo`` if it is OWNER/NAME; ValueError (one line) otherwise."""
    if not _REPO.fullmatch(repo or ""):
        raise ValueError(f"--repo {repo!r}: expected OWNER/NAME")
    return repo


def check_api_url(url: str) -> str:
    """The API base URL without a trailing slash; ValueError (one line) when it is no HTTP(S) URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"GITHUB_API_URL {url!r}: expected an http(s):// URL")
    return url.rstrip("/")


class IssuesAPI:
    def __init__(self, api_url: str, repo: str, token: str, *, timeout: float = TIMEOUT_S):
        self.api_url, self.repo = check_api_url(api_url), check_repo(repo)
        self.token, self.timeout = token, timeout

    def find(self, marker: str) -> Issue | None:
        """The triage issue (open or closed) whose body holds ``marker``; the oldest if several."""
        found = None
        for page in range(1, MAX_PAGES + 1):
            query = {"labels": LABEL, "state": "all", "per_page": PER_PAGE, "page": page}
            items = self._call("GET", f"/repos/{self.repo}/issues", query=query)
            if not isinstance(items, list):
                raise GitHubError(f"GitHub API GET /repos/{self.repo}/issues: expected a list")
            for item in items:
                if "pull_request" not in item and marker in (item.get("body") or ""):
                    issue = _issue(item)
                    if found is None or issue.number < found.number:
                        found = issue
            if len(items) < PER_PAGE:
                return found
        return found

    def create(self, title: str, body: str) -> Issue:
        data = {"title": title, "body": body, "labels": [LABEL]}
        return _issue(self._call("POST", f"/repos/{self.repo}/issues", body=data))

    def edit(self, number: int, body: str) -> Issue:
        path = f"/repos/{self.repo}/issues/{number}"
        return _issue(self._call("PATCH", path, body={"body": body}))

    def comment(self, number: int, body: str) -> str:
        path = f"/repos/{self.repo}/issues/{number}/comments"
        return str(self._call("POST", path, body={"body": body}).get("html_url", ""))

    def _call(self, method: str, path: str, *, query=None, body=None) -> Any:
        url = self.api_url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(
            url,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self.token}",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "perfgate-triage",
                **({"Content-Type": "application/json"} if body is not None else {}),
            },
        )
        where = f"GitHub API {method} {path}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise GitHubError(f"{where}: HTTP {exc.code} {exc.reason}{_message(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GitHubError(f"{where}: cannot reach {self.api_url} ({reason})") from None
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise GitHubError(f"{where}: the answer is not JSON") from None


def publish(api: IssuesAPI, marker: str, title: str, body: str, note: str) -> Published:
    """Open the culprit's issue, or update the one holding ``marker``: the body replaced by
    ``body`` (which must hold the marker) and ``note`` added as a comment."""
    if marker not in body:
        raise ValueError("the issue body must hold its marker, or a rerun would not find it")
    found = api.find(marker)
    if found is None:
        return Published(api.create(title, body), "opened")
    edited = api.edit(found.number, body)
    api.comment(found.number, note)
    return Published(edited, "updated")


def _issue(item: Any) -> Issue:
    try:
        return Issue(
            int(item["number"]), str(item.get("html_url", "")), item["state"], item["body"] or ""
        )
    except (KeyError, TypeError, ValueError):
        raise GitHubError("GitHub API: an issue without number, state or body") from None


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        text = json.loads(exc.read()).get("message", "")
    except (ValueError, AttributeError, OSError):
        return ""
    return f": {' '.join(str(text).split())[:200]}" if text else ""
