"""Site chrome (navigation, banners, footers, a manual's Prev/Next blocks) is kept out of an
HTML page's text; the page's own header with its title, and a page of links only, stay."""

from __future__ import annotations

from ingestion_pipeline.processing import parse


def texts(html: str) -> list[str]:
    return [section.text for section in parse(html.encode(), "page.html", max_bytes=10**6).sections]


def test_a_manuals_navigation_blocks_are_not_text():
    page = (
        "<html><head><title>VACUUM</title></head><body>"
        '<div class="navheader"><table><tr><td><a href="a.html">Prev</a></td><td><a href="u.html">Up</a></td>'
        '<td><a href="n.html">Next</a></td></tr></table></div>'
        '<div class="refentry"><h2>VACUUM</h2><p>VACUUM reclaims storage occupied by dead tuples.</p></div>'
        '<div class="navfooter"><a href="a.html">Prev</a> <a href="index.html">Home</a></div></body></html>'
    )
    assert texts(page) == ["VACUUM\n\nVACUUM reclaims storage occupied by dead tuples."]


def test_landmarks_and_site_header_and_footer_are_not_text():
    page = (
        '<body><header><a href="/">Acme docs</a> <form role="search"><input></form></header>'
        '<div role="navigation">Guides Reference</div><main><article><header><h2>Backups</h2></header>'
        "<p>Take a base backup nightly.</p><footer>Edited by ops</footer></article></main>"
        '<footer><p>Copyright Acme</p></footer><nav class="breadcrumbs">Home / Docs</nav></body>'
    )
    assert texts(page) == ["Backups\n\nTake a base backup nightly.\n\nEdited by ops"]


def test_a_header_holding_the_pages_title_stays():
    page = "<body><header><h1>Release notes</h1></header><p>Version 2 adds partitions.</p></body>"
    assert texts(page) == ["Release notes\n\nVersion 2 adds partitions."]


def test_a_page_that_is_all_navigation_keeps_its_links():
    assert texts("<body><nav><a>Home</a> <a>Contact</a></nav></body>") == ["Home Contact"]


def test_a_table_of_contents_is_not_text_and_a_list_with_prose_stays():
    toc = "".join(f'<li><a href="{n}.html">sphinx-{n}</a></li>' for n in ("build", "apidoc", "quickstart"))
    prose = (
        "<ul><li><a href='a.html'>VACUUM</a> reclaims storage occupied by dead tuples</li>"
        "<li><a href='b.html'>ANALYZE</a> collects statistics about a table's contents</li>"
        "<li><a href='c.html'>CLUSTER</a> orders a table by one of its indexes</li></ul>"
    )
    page = f'<body><h1>Man pages</h1><p>The tools.</p><div class="toctree-wrapper"><ul>{toc}</ul></div>{prose}</body>'
    [text] = texts(page)
    assert "sphinx-build" not in text and "The tools." in text  # the chapter's list of its pages
    assert "VACUUM reclaims storage" in text and "CLUSTER orders" in text  # links in sentences stay
