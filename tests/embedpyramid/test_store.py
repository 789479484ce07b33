import pytest

from embedpyramid.store import atomic_path, write_text


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    target = write_text("old", tmp_path / "artefact.txt")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as temporary:
            temporary.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["artefact.txt"]
