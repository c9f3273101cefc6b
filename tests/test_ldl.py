"""The contact solver's dense L D L^T factor and solve (``contact.ldl``) against numpy."""

import numpy as np
import warp as wp

import sim_core as sc
from sim_core.contact.ldl import ldl_factor, ldl_solve


@wp.kernel(enable_backward=False)
def _factor_and_solve(
    m: wp.array3d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), k: wp.array(dtype=wp.int32)
):
    w = wp.tid()
    ldl_factor(m, w, k[w])
    ldl_solve(m, b, w, k[w])


def _solve_all(mats: np.ndarray, rhs: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    dev = str(sc.device)
    m = wp.array(mats, dtype=wp.float32, device=dev)
    b = wp.array(rhs, dtype=wp.float32, device=dev)
    k = wp.array(sizes.astype(np.int32), dtype=wp.int32, device=dev)
    wp.launch(_factor_and_solve, dim=len(sizes), inputs=[m, b, k], device=dev)
    return b.numpy()


def test_ldl_solves_spd_systems_of_every_size():
    """Systems of 1 to 12 rows, each a well-conditioned SPD matrix like the normal rows' W plus
    regularization; the entries past row ``k`` are left alone."""
    rng = np.random.default_rng(0)
    n, size = 48, 12
    sizes = np.arange(n) % size + 1
    mats = np.zeros((n, size, size), np.float32)
    rhs = rng.normal(size=(n, size)).astype(np.float32)
    for i, k in enumerate(sizes):
        a = rng.normal(size=(k, 15))
        mats[i, :k, :k] = a @ a.T / 15 + 0.1 * np.eye(k)
    x = _solve_all(mats, rhs, sizes)
    for i, k in enumerate(sizes):
        want = np.linalg.solve(mats[i, :k, :k].astype(np.float64), rhs[i, :k].astype(np.float64))
        np.testing.assert_allclose(x[i, :k], want, rtol=2e-4, atol=2e-5, err_msg=f"k = {k}")
        np.testing.assert_array_equal(x[i, k:], rhs[i, k:])


def test_ldl_drops_a_row_that_depends_on_the_earlier_ones():
    """Two coplanar contacts give equal rows: the second's pivot vanishes, its unknown is 0 and the
    first carries the whole right-hand side; the system stays solved."""
    w = np.array([[2.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    mats = np.zeros((1, 4, 4), np.float32)
    mats[0, :4, :4] = np.block([[w, w[:, :1]], [w[:1, :], w[:1, :1]]])  # row 3 repeats row 0
    rhs = np.array([[1.0, 2.0, 3.0, 1.0]], np.float32)
    x = _solve_all(mats, rhs, np.array([4]))[0]
    assert x[3] == 0.0
    np.testing.assert_allclose(x[:3], np.linalg.solve(w, rhs[0, :3]), rtol=1e-5, atol=1e-6)
