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


def test_update_document_keeps_the_other_generated_block(tmp_path):
    doc = tmp_path / "P.md"
    doc.write_text(f"a\n{profile.BEGIN_MARK}\nt1\n{profile.END_MARK}\nb\n{profile.ACCURACY_BEGIN_MARK}\nt2\n{profile.END_MARK}\n")
    profile.update_document(doc, "T2", profile.ACCURACY_BEGIN_MARK)
    profile.update_document(doc, "T1")
    assert doc.read_text() == (f"a\n{profile.BEGIN_MARK}\nT1\n{profile.END_MARK}\nb\n"
                               f"{profile.ACCURACY_BEGIN_MARK}\nT2\n{profile.END_MARK}\n")


def test_update_document_refuses_a_document_without_markers(tmp_path):
    doc = tmp_path / "P.md"
    doc.write_text("# no markers\n")
    with pytest.raises(SystemExit):
        profile.update_document(doc, "| t |")
    assert doc.read_text() == "# no markers\n"


def test_the_shipped_profile_document_has_the_markers():
    from conftest import REPO  # a document of the checkout, not of the installed package
    text = (REPO / "docs" / "PROFILE.md").read_text()
    assert text.count(profile.BEGIN_MARK) == 1 and text.count(profile.ACCURACY_BEGIN_MARK) == 1
    from rawindexer import paged_profile

    assert text.count(paged_profile.BEGIN_MARK) == 1
    assert text.count(profile.END_MARK) == 4  # the gfx950 static, accuracy, gfx942 static and decode blocks
    # each generated block ends at its own END marker: the static one comes first
    assert text.index(profile.BEGIN_MARK) < text.index(profile.END_MARK) < text.index(profile.ACCURACY_BEGIN_MARK)


# ---- top-k agreement (rawindexer.accuracy) and python -m rawindexer.profile --accuracy ----
import numpy as np  # noqa: E402

from rawindexer.accuracy import realistic_inputs, topk_agreement  # noqa: E402
from rawindexer.fp8 import decode_e4m3fn  # noqa: E402
from rawindexer.testing.windows import causal  # noqa: E402


def test_topk_agreement_counts_flips_and_noise(rng):
    M, N = 3, 64
    ks, ke = np.zeros(M, np.int32), np.full(M, N, np.int32)
    ref = rng.standard_normal((M, N))
    exact = ref + 1e-3 * rng.standard_normal((M, N))  # quantisation noise of ~1e-3
    same = topk_agreement(ref.astype(np.float32), ref, exact, ks, ke, k=8)
    assert same.rows == M and same.recall == 1.0 and same.flips == 0
    out = ref.copy()
    order = np.argsort(-ref[1])
    inside, outside = order[7], order[8]          # the last selected key and the first left out
    out[1, inside], out[1, outside] = ref[1, outside], ref[1, inside]
    swapped = topk_agreement(out, ref, exact, ks, ke, k=8)
    assert swapped.flips == 1 and swapped.recall == (3 * 8 - 1) / 24 and swapped.min_recall == 7 / 8
    near = abs(ref[1, outside] - ref[1, inside]) <= np.std(ref[1] - exact[1])
    assert swapped.flips_in_noise == int(near)
    far = ref.copy()
    far[0, np.argmax(ref[0])] = -100.0               # drop the best key of row 0: far outside the noise
    moved = topk_agreement(far, ref, exact, ks, ke, k=8)
    assert moved.flips == 1 and moved.flips_in_noise == 0
    assert topk_agreement(ref, ref, exact, ks, ke, k=N).rows == 0  # k >= window: nothing to rank
    assert topk_agreement(ref, ref, exact, ks, ke, k=None, fraction=8).rows == M


def test_realistic_inputs_use_the_fp8_range_per_token(rng):
    ks, ke = causal(4, 40, diagonal=True)
    inp = realistic_inputs(rng, 4, 40, 32, 64, ks, ke)
    q = np.abs(decode_e4m3fn(inp.q_fp8)).max(axis=-1)
    k = np.abs(decode_e4m3fn(inp.k_fp8)).max(axis=-1)
    assert (q == 448).all() and (k == 448).all()  # each (row, head) and token scaled to the fp8 maximum
    from rawindexer.testing.windows import window_mask
    assert np.array_equal(np.isfinite(inp.unquantised), window_mask(ks, ke, 40))


def test_accuracy_tables_small_case_on_the_emulator():
    text = profile.accuracy_tables(("seed", "mrp"), [("causal", 4, 384)], [(32, 64)], (2, 40), seed=0)
    rows = [ln for ln in text.splitlines() if ln.startswith("| causal")]
    assert len(rows) == 2
    seed_row = next(r for r in rows if "| seed |" in r).split("|")
    assert float(seed_row[3]) <= 1e-5                 # the default design's worst eps
    assert float(seed_row[7].split()[0]) >= 0.99      # recall@window/8
    eps_rows = [ln for ln in text.splitlines() if ln.startswith("| seed [")]
    assert len(eps_rows) == 1 and all(float(c) <= 1e-5 for c in eps_rows[0].split("|")[2:-1])
