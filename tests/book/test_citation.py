"""How to cite: CITATION.cff (read by GitHub's "Cite this repository") names this book and
library and the paper it reproduces, and the book's bibliography gives the paper its authors,
venue and links, so that the rendered citation names the authors and sorts under N."""

import yaml

ARXIV_ID = "2603.11970"
ARXIV_URL = f"https://arxiv.org/abs/{ARXIV_ID}"
OPENREVIEW_URL = "https://openreview.net/forum?id=Wa3cfE3Iay"
AUTHORS = [("Nelson", "Walter"), ("Fumero", "Marco"), ("Karaletsos", "Theofanis"), ("Locatello", "Francesco")]
TITLE = "Statistical and structural identifiability in representation learning"


def test_citation_cff_has_the_required_keys_and_cites_the_paper(root):
    text = (root / "CITATION.cff").read_text()
    cff = yaml.safe_load(text)
    assert cff["cff-version"] == "1.2.0"
    assert cff["message"].strip() and "nearid" in cff["title"]
    assert cff["authors"] and all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert ARXIV_ID in text
    papers = [r for r in [cff.get("preferred-citation"), *cff.get("references", [])] if r and r["title"] == TITLE]
    assert len(papers) == 1, "the paper is cited once, by its title"
    paper = papers[0]
    assert [(a["family-names"], a["given-names"]) for a in paper["authors"]] == AUTHORS
    assert paper["year"] == 2026 and "ICLR 2026" in paper["conference"]["name"]
    links = {paper.get("url"), *(i["value"] for i in paper.get("identifiers", []))}
    assert {ARXIV_URL, OPENREVIEW_URL} <= links


def test_the_bibliography_gives_the_paper_its_authors_venue_and_links(root):
    from pybtex.database import parse_file

    bib = root / "book" / "references.bib"
    assert ARXIV_ID in bib.read_text()
    entry = parse_file(str(bib)).entries["paper2026nearid"]
    assert [(str(p.last_names[0]), str(p.first_names[0])) for p in entry.persons["author"]] == AUTHORS
    assert entry.fields["title"] == TITLE and "ICLR 2026" in entry.fields["booktitle"]
    assert entry.fields["eprint"] == ARXIV_ID, "rendered as a link to arXiv"
    assert entry.fields["url"] == OPENREVIEW_URL


def test_readme_and_intro_name_the_authors_and_link_arxiv_and_openreview(root):
    for rel in ("README.md", "book/intro.md"):
        text = " ".join((root / rel).read_text().split())
        assert "Walter Nelson, Marco Fumero, Theofanis Karaletsos and Francesco Locatello" in text, rel
        assert ARXIV_URL in text and OPENREVIEW_URL in text, rel
