from nearid.book.runner import run_chapter


def test_chapter_01_smoke(tmp_path, mnist_root):
    res = run_chapter("01", profile="smoke", out_dir=tmp_path)
    assert res["profile"] == "smoke"
    clean = res["rotated_copy_error"]
    assert clean["rigid"] < 1e-8 and clean["linear"] < 1e-8 and clean["permutation"] > 0.05
    assert set(res["ica_amari"]) == {"laplace", "uniform"}
    assert (tmp_path / "01_definitions.ipynb").is_file()
