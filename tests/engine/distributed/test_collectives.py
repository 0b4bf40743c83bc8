"""all_reduce / broadcast / all_gather / barrier on 2 and 4 MPI ranks against NumPy on every rank's input, a
non-contiguous view reduced in place, a device array staged through host memory, and the CommEvents reported."""
from __future__ import annotations

import numpy as np
import pytest

from mpi_job import requires_mpi, run

pytestmark = requires_mpi

REDUCE = {"sum": lambda a: a.sum(axis=0), "mean": lambda a: a.mean(axis=0), "max": lambda a: a.max(axis=0),
          "min": lambda a: a.min(axis=0)}


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_match_numpy_on_every_rank(tmp_path, n):
    run("collectives.py", n, tmp_path)
    results = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(n)]
    inputs = {name: np.stack([res[f"input_{name}"] for res in results]) for name in ("float64", "float32", "int64")}
    for rank, res in enumerate(results):
        for op, reduce in REDUCE.items():
            np.testing.assert_allclose(res[f"{op}_f64"], reduce(inputs["float64"]), rtol=1e-12)
            np.testing.assert_allclose(res[f"{op}_f32_tensor"], reduce(inputs["float32"].astype(np.float64)),
                                       rtol=1e-5)
            assert res[f"{op}_f32_tensor"].dtype == np.float32
        np.testing.assert_array_equal(res["sum_i64"], inputs["int64"].sum(axis=0))
        strided = inputs["float64"][rank].copy()
        strided[:, ::2] = inputs["float64"][:, :, ::2].sum(axis=0)  # only the view's columns were reduced
        np.testing.assert_allclose(res["strided_base"], strided, rtol=1e-12)
        np.testing.assert_array_equal(res["broadcast"], inputs["float64"][n - 1])
        np.testing.assert_array_equal(res["broadcast_tensor"], inputs["float32"][0])
        np.testing.assert_array_equal(res["all_gather"], inputs["float32"])
        assert f"rank {rank} passed shape ({rank + 1},)" in str(res["mismatch_error"])
        np.testing.assert_allclose(res["staged_device"], inputs["float32"].sum(axis=0), rtol=1e-5)
        events = [e.split(":") for e in res["events"].tolist()]
        assert all(ordered == "True" and bucket == "-1" for _, bucket, _, ordered in events)
        names = [name for name, *_ in events]
        assert names.count("allreduce") == 4 * 2 + 1 + 1 + 1  # ops x (f64, f32) + int64 + strided + staged
        assert names.count("broadcast") == 2 and names.count("barrier") == 1
        assert names.count("all_gather") == 1  # the refused one reports nothing
        gathered = next(int(nbytes) for name, _, nbytes, _ in events if name == "all_gather")
        assert gathered == inputs["float32"].nbytes
