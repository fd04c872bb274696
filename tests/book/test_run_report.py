"""The "How this book was run" page says which code it ran and when, computed when the page
is written (never typed): the repository (the checkout's origin remote, without credentials),
the commit (`git rev-parse --short HEAD`, marked when tracked files differ) and the time in
UTC; outside a git checkout it says "unknown"."""

import datetime as dt
import subprocess

from nearid.book import runner


def _row(report, name):
    return next(line for line in report.splitlines() if line.startswith(f"| {name} |"))


def _write(root):
    return runner.write_run_report(root / "book" / "executed", root).read_text()


def test_outside_a_checkout_the_commit_is_unknown(tmp_path):
    (tmp_path / "book" / "executed").mkdir(parents=True)
    report = _write(tmp_path)
    assert "## This build" in report
    assert "unknown" in _row(report, "commit") and "unknown" in _row(report, "repository")
    written = dt.datetime.fromisoformat(_row(report, "this page written (UTC)").split("|")[2].strip())
    assert written.utcoffset() == dt.timedelta(0)
    assert abs((dt.datetime.now(dt.timezone.utc) - written).total_seconds()) < 120


def test_in_a_checkout_the_commit_and_remote_are_read_from_git(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "book" / "executed").mkdir(parents=True)
    (tmp_path / "tracked.txt").write_text("one\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "tracked.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    report = _write(tmp_path)
    assert _row(report, "commit") == f"| commit | {head} |"
    assert "no `origin` remote" in _row(report, "repository")

    subprocess.run([*git, "remote", "add", "origin", "https://someone:s3cret@example.org/team/nearid.git"],
                   check=True)
    (tmp_path / "tracked.txt").write_text("two\n")
    report = _write(tmp_path)
    assert _row(report, "repository") == "| repository | https://example.org/team/nearid.git |"
    assert "s3cret" not in report
    assert _row(report, "commit") == f"| commit | {head} (with uncommitted changes to tracked files) |"
