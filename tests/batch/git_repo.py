"""A throwaway git repository for the `vq-lsp score --git` tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

START = 1_700_000_000  # the first commit's date, 2023-11-14 22:13:20 UTC


class Repo:
    """A throwaway repository; every commit gets a distinct, increasing date so the order is certain."""

    def __init__(self, root: Path) -> None:
        self.root, self.clock = root, 0
        root.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        env = {
            "GIT_AUTHOR_DATE": f"{START + self.clock} +0000",
            "GIT_COMMITTER_DATE": f"{START + self.clock} +0000",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.root),
            "PATH": os.environ.get("PATH", ""),
        }
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
            cwd=self.root,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def commit(self, message: str, **files: str | bytes | None) -> str:
        for name, content in files.items():
            path = self.root / name.replace("__", "/")
            if content is None:
                self.git("rm", "-q", str(path.relative_to(self.root)))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
            self.git("add", str(path.relative_to(self.root)))
        self.clock += 60
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()
