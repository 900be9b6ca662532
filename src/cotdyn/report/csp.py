"""The Content-Security-Policy every HTML page cotdyn writes carries (docs/reference.md section 7).

A page opened from a study folder, alone or embedded in ``snakemake --report``'s report.html (an
iframe whose source is the page as a data URL), runs nothing and requests nothing: no script, no
plugin, no frame, no font or stylesheet fetched, no form sent; images only from the page itself
(data URLs); styles only the page's own inline ones. The policy is the first thing after the
charset in the page's head, so it governs every byte that follows, whatever those bytes are.

``carries_policy`` checks that of any page: nothing but a doctype, ``<html>``, ``<head>`` and the
charset may precede the policy. A later policy can only narrow it (every policy a page carries is
enforced), and no script can run to remove it. A page planted without it is refused by the report
(``refuse_unguarded``, when ``snakemake --report`` starts) and fails the audit, which re-renders every page.
"""

from __future__ import annotations

import re
from pathlib import Path

POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
META = f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
_META = META.encode()

# What may precede the policy: a doctype, <html> (docutils' with its namespace), <head>, the charset.
_BEFORE = re.compile(
    rb"\A<!DOCTYPE html>\s*<html(?: xmlns=\"http://www\.w3\.org/1999/xhtml\" xml:lang=\"en\")?(?: lang=\"en\")?>\s*<head>\s*<meta charset=[\"']utf-8[\"'](?: /)?>\s*\Z",
    re.IGNORECASE,
)
_CHARSET = re.compile(r"<meta charset=[\"']utf-8[\"'](?: /)?>", re.IGNORECASE)


class MissingPolicyError(ValueError):
    """A page cotdyn would write without its policy (a change to a page's head that lost it)."""


def with_policy(page: str) -> str:
    """``page`` with the policy inserted right after its charset declaration."""
    found = _CHARSET.search(page)
    if found is None:
        raise MissingPolicyError("the page declares no charset, so the policy has no place in its head")
    out = page[: found.end()] + "\n" + META + page[found.end() :]
    if not carries_policy(out.encode()):
        raise MissingPolicyError("the page's head holds more than its charset before the policy")
    return out


def carries_policy(data: bytes) -> bool:
    """Whether the page's policy comes before anything but a doctype, <html>, <head> and a charset."""
    at = data.find(_META, 0, 512)
    return at >= 0 and _BEFORE.match(data[:at]) is not None


# What a browser renders as a page; snakemake --report embeds every report() output, each page as
# a data URL in an iframe of report.html, where it runs what it holds (docs/reference.md section 7).
PAGE_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml", ".svg", ".xml", ".mht", ".mhtml")


class UnguardedPageError(ValueError):
    """A page in the study without cotdyn's Content-Security-Policy at its head (cotdyn.report.csp)."""


def unguarded_pages(study_dir) -> list[str]:
    """Every page in the study (links are not followed) that does not carry cotdyn's policy first
    in its head (carries_policy), by relative path: a page no rule of this
    version wrote, or one edited."""
    study_dir, found = Path(study_dir), []
    for path in sorted(study_dir.rglob("*")):
        if path.name.lower().endswith(PAGE_SUFFIXES) and not path.is_symlink() and path.is_file():
            with path.open("rb") as f:
                head = f.read(1024)
            if not carries_policy(head):
                found.append(path.relative_to(study_dir).as_posix())
        elif path.name.lower().endswith(PAGE_SUFFIXES) and path.is_symlink():
            found.append(path.relative_to(study_dir).as_posix())
    return found


def refuse_unguarded(study_dir) -> None:
    """Stop ``snakemake --report`` before it embeds a page that could run script or send a request
    (report.html carries no policy of its own and puts no sandbox on its iframes)."""
    pages = unguarded_pages(study_dir)
    if pages:
        raise UnguardedPageError(
            f"cotdyn: {len(pages)} page(s) in {study_dir} do not carry cotdyn's Content-Security-Policy "
            f"first in their head, so report.html would run what they hold: {', '.join(pages[:10])}"
            + (f" and {len(pages) - 10} more" if len(pages) > 10 else "")
            + "; these are not pages this version of cotdyn wrote: run cotdyn audit on the study, or remove "
            "them and let the rules write them again"
        )
