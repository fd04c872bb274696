import numpy as np
import pytest

from nearid.data import mnist, text


@pytest.fixture(scope="module")
def mnist_tmp(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    sums = mnist.provision_mnist(root)
    return root, sums


def test_mnist_idx_files_match_checksums_and_torchvision_reads_them(mnist_tmp):
    from torchvision.datasets import MNIST

    root, sums = mnist_tmp
    assert sums == mnist.MNIST_MD5
    assert mnist.raw_folder(root) == root / "provisioned" / "MNIST" / "raw"
    train = MNIST(root=str(root / "provisioned"), train=True, download=False)
    test = MNIST(root=str(root / "provisioned"), train=False, download=False)
    assert len(train) == 60000 and len(test) == 10000
    assert train.data.dtype.is_floating_point is False and int(train.data.max()) == 255
    assert train.targets[:5].tolist() == [5, 0, 4, 1, 9]


def test_load_mnist_filters_digits(mnist_tmp):
    root, _ = mnist_tmp
    X, y = mnist.load_mnist(root, train=False, n=100, digits=[3, 7])
    assert X.shape == (100, 28, 28) and X.dtype == np.float32
    assert set(np.unique(y)) <= {3, 7} and 0 <= X.min() and X.max() <= 1


def test_provisioning_is_idempotent(mnist_tmp):
    root, _ = mnist_tmp
    path = mnist.raw_folder(root) / "t10k-labels-idx1-ubyte"
    before = path.stat().st_mtime_ns
    mnist.provision_mnist(root)
    assert path.stat().st_mtime_ns == before


def test_corrupt_and_missing_files_give_fix_instructions(tmp_path):
    mnist.provision_mnist(tmp_path)
    f = mnist.raw_folder(tmp_path) / "t10k-images-idx3-ubyte"
    data = bytearray(f.read_bytes())
    data[100] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(mnist.DataError, match="corrupt.*nearid data"):
        mnist.verify_mnist(tmp_path)
    f.unlink()
    with pytest.raises(mnist.DataError, match="missing.*nearid data"):
        mnist.load_mnist(tmp_path)


def test_provisioned_files_stay_under_provisioned_beside_the_readme(tmp_path):
    """Everything `nearid data` writes is under data/provisioned/: removing that folder and
    provisioning again never touches the tracked data/README.md."""
    readme = tmp_path / "README.md"
    readme.write_text("tracked\n")
    text.provision_shakespeare(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "provisioned"]
    assert text.text_path(tmp_path) == tmp_path / "provisioned" / "shakespeare" / "plays.txt"
    assert readme.read_text() == "tracked\n"


def test_shakespeare_text(tmp_path):
    digest = text.provision_shakespeare(tmp_path)
    assert len(digest) == 64
    t = text.load_shakespeare(tmp_path)
    assert len(t) > 4_000_000 and "HAMLET" in t and "**" not in t
    assert text.load_shakespeare(tmp_path, max_chars=100) == t[:100]
    text.text_path(tmp_path).write_text("tampered")
    with pytest.raises(mnist.DataError, match="corrupt"):
        text.load_shakespeare(tmp_path)


def test_sentences_fixed_and_long_enough():
    text_ = "\n".join([f"line number {i} has five words" for i in range(50)] + ["HAMLET.", "Exit."])
    s = text.shakespeare_sentences(text_, 10, seed=0)
    assert len(s) == 10 and len(set(s)) == 10
    assert s == text.shakespeare_sentences(text_, 10, seed=0)
    assert all(len(x.split()) >= 5 for x in s)
    with pytest.raises(ValueError, match="only 50"):
        text.shakespeare_sentences(text_, 51)
