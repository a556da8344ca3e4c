"""Who may read what: the bearer token, repos that do not exist or are gated (answered as the
real Hub does: 401 without a valid token, whether private or missing), and whoami-v2."""

from __future__ import annotations

from .http import RequestPlumbing
from .repos import Repo

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
WHOAMI = {
    "type": "user",
    "id": "6650b5a8c0ffee0000000001",
    "name": "lab-user",
    "fullname": "noderig lab user",
    "email": "lab@noderig.invalid",
    "emailVerified": True,
    "canPay": False,
    "isPro": False,
    "periodEnd": None,
    "avatarUrl": "",
    "orgs": [],
    "auth": {"type": "access_token", "accessToken": {"displayName": "lab", "role": "read",
                                                    "createdAt": "2026-01-01T00:00:00.000Z"}},
}


class HubAuth(RequestPlumbing):
    def _token(self) -> tuple[bool, bool]:
        """(a token was sent, it is valid)."""
        auth = self.headers.get("Authorization", "")
        if not auth:
            return False, False
        scheme, _, token = auth.partition(" ")
        return True, scheme.lower() == "bearer" and token.strip() in self.hub.tokens

    def _repo(self, repo_id: str, revision: str | None = None) -> tuple[Repo, str]:
        """The repo and resolved commit, or an error response like the real Hub's."""
        sent, valid = self._token()
        if sent and not valid:
            self._error(401, INVALID_CREDENTIALS)
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            # Without a valid token the real Hub answers 401 (it won't tell private from missing).
            self._error(404 if valid else 401, "Repository not found", "RepoNotFound")
        if self.hub.is_gated(repo_id) and not valid:
            self._error(401, f"Access to model {repo_id} is restricted. You must have access to it and be "
                             "authenticated to access it. Please log in.", "GatedRepo")
        commit = repo.resolve(revision or "main")
        if commit is None:
            self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return repo, commit

    def _whoami(self) -> None:
        sent, valid = self._token()
        if not valid:
            self._error(401, INVALID_CREDENTIALS if sent else "Invalid username or password.")
        self._json(200, WHOAMI)
