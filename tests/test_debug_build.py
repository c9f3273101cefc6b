"""The contact code under Warp's debug build, which checks every array, vector and matrix index a
kernel takes. The release build does not: an index past a ``mat33``'s columns reads whatever lies
beyond it, and the compiler may assume that never happens and compile the code around it
differently. A child process (the build mode is process-wide) runs some of the contact tests
again with ``wp.config.mode = "debug"``; a failed check aborts it with Warp's message, which names
the header and line."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# every pair's detection, box faces' manifolds, a stack of cubes, a grasp, the
# adaptive substeps, and a step shared among host threads (one after another in the debug build)
TESTS = (
    "tests/test_collision.py",
    "tests/test_contacts.py::test_three_stacked_cubes_stay_standing",
    "tests/test_contacts.py::test_franka_grasps_lifts_and_holds_a_cube_in_every_env",
    "tests/test_contacts.py::test_a_step_that_ends_too_deep_is_redone_in_substeps",
    "tests/test_contacts.py::test_the_number_of_host_threads_changes_no_bit",
)
# Warp prints a failed check's message with C's printf, then aborts: C's stdout unbuffered and
# pytest's capture off (-s), so the message reaches the pipe before the abort
CHILD = """
import ctypes, sys
import pytest, warp
libc = ctypes.CDLL(None)
libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), None, 2, 0)  # 2: _IONBF
warp.config.mode = "debug"
sys.exit(pytest.main(sys.argv[1:]))
"""


@pytest.mark.skipif(
    os.environ.get("WARPGYM_TEST_DEVICE", "cpu") != "cpu",
    reason="the CPU build checks the same kernel source; a CUDA debug build compiles for minutes",
)
def test_the_contact_code_keeps_every_index_in_bounds():
    run = subprocess.run(
        [sys.executable, "-c", CHILD, "-q", "-x", "-s", "-p", "no:cacheprovider", *TESTS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[:1500]
