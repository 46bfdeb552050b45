"""python -m rawindexer.profile --update: rewrites only the generated block of the document."""
import pytest

from rawindexer import profile


def test_update_document_replaces_only_the_generated_block(tmp_path):
    doc = tmp_path / "P.md"
    doc.write_text(f"# head\nprose\n{profile.BEGIN_MARK}\nold table\n{profile.END_MARK}\n## Path taken\nkept\n")
    profile.update_document(doc, "| new |")
    assert doc.read_text() == f"# head\nprose\n{profile.BEGIN_MARK}\n| new |\n{profile.END_MARK}\n## Path taken\nkept\n"
    profile.update_document(doc, "| newer |")  # idempotent shape: markers stay, one block
    assert doc.read_text().count(profile.BEGIN_MARK) == 1 and "| new |" not in doc.read_text()


def test_update_document_refuses_a_document_without_markers(tmp_path):
    doc = tmp_path / "P.md"
    doc.write_text("# no markers\n")
    with pytest.raises(SystemExit):
        profile.update_document(doc, "| t |")
    assert doc.read_text() == "# no markers\n"


def test_the_shipped_profile_document_has_the_markers():
    from conftest import REPO  # a document of the checkout, not of the installed package
    text = (REPO / "docs" / "PROFILE.md").read_text()
    assert text.count(profile.BEGIN_MARK) == 1 and text.count(profile.END_MARK) == 1
