"""The Warp behaviours sim_core relies on beyond Warp's documented API, each checked on its own.

pyproject.toml pins ``warp-lang`` to the release these pass on. Before widening the pin, run this
file on the new release: a failure names the behaviour that changed and the sim_core code that
depends on it, which would otherwise show up as a wrong or failing simulation far from its cause.

- ``wp.Function.func``: the Python function behind ``@wp.func``; ``contact.specialize``
  rebuilds the contact solver's functions from its ``__code__`` with a copy of the module's globals
  in which the model's generated dof helpers replace the generic ones.
- Warp resolves the names a function calls through that function's ``__globals__`` when it
  generates code, registers a rebuilt function in the Warp module named by ``__name__`` in those
  globals, and compiles two rebuilds of one function with different helpers apart.
- On the CPU a launch runs its threads one after another, in order, in one OS thread: the contact
  solver's scratch is one env's worth there, viewed with a stride of 0 over envs
  (``contact.buffers.make_contact_data``), and the step kernel takes several envs per thread.
- ``wp.array(ptr=..., strides=(0, ...), deleter=...)``: such a view aliases its owner's memory and
  keeps the owner alive through the deleter's closure.
- ``wp.to_torch`` / ``wp.from_torch`` alias memory, and a recorded launch (``record_cmd=True``)
  reads and writes the tensors it was recorded with at each ``.launch()``: the solver's state
  tensors, ``EnvRNG`` and the reach task's observation kernel depend on it.
- A recorded CPU launch keeps its launch bounds and packed arguments in ``wp.Launch.params`` and
  its entry point in ``hooks.forward``, which takes the bounds and a ctypes struct of the
  arguments: ``host_threads.PackedLaunch`` packs that struct once instead of at every launch.
- The module option ``cpu_compiler_flags`` reaches the CPU compiler (``step.cpu_compiler_flags``
  adds ``-ffast-math`` to ``wp.config.cpu_compiler_flags``), and ``wp.config.log_level`` is what
  silences Warp's messages (``sim_core.init(debug=False)``).
"""

import gc
import types
import weakref

import numpy as np
import pytest
import torch
import warp as wp

import sim_core as sc
from sim_core import host_threads, step
from sim_core.contact import buffers, solver
from sim_core.contact.geometry import ContactSlots


def _device() -> str:
    return str(sc.device)


def _run(kernel, x: np.ndarray) -> np.ndarray:
    a = wp.array(x, dtype=wp.float32, device=_device())
    out = wp.zeros_like(a)
    wp.launch(kernel, dim=len(x), inputs=[a], outputs=[out], device=_device())
    return out.numpy()


# ---- functions rebuilt with new globals (contact.specialize) -----------------------------


@wp.func
def _helper(x: float) -> float:
    return x + 1.0


@wp.func
def _caller(x: float) -> float:
    """Calls ``_helper`` by name, as the solver's functions call the dof helpers."""
    return 2.0 * _helper(x)


@wp.func
def _helper_times_ten(x: float) -> float:
    return 10.0 * x


@wp.func
def _helper_minus_three(x: float) -> float:
    return x - 3.0


def _rebuild(f: wp.Function, helper: wp.Function, module_name: str) -> wp.Function:
    """``f`` made again as ``contact.specialize`` makes each function: the same code with a
    copy of its module's globals, ``__name__`` set to another module and ``_helper`` replaced."""
    scope = dict(globals())
    scope["__name__"] = module_name
    scope["_helper"] = helper
    py = types.FunctionType(f.func.__code__, scope, f.func.__name__, f.func.__defaults__, f.func.__closure__)
    py.__annotations__ = dict(f.func.__annotations__)
    py.__doc__ = f.func.__doc__
    return wp.func(py)


def _kernel_calling(g: wp.Function):
    @wp.kernel(enable_backward=False, module="unique")
    def apply(x: wp.array(dtype=wp.float32), y_out: wp.array(dtype=wp.float32)):
        i = wp.tid()
        y_out[i] = g(x[i])

    return apply


def test_every_contact_solver_function_keeps_its_python_function():
    funcs = {n: f for n, f in vars(solver).items() if isinstance(f, wp.Function)}
    assert "solve_contacts" in funcs and "start_row" in funcs, "wp.func no longer returns a wp.Function"
    for name, f in funcs.items():
        py = getattr(f, "func", None)
        assert isinstance(py, types.FunctionType), (
            f"wp.Function.func of {name} is {py!r}, not the Python function: contact.specialize "
            "rebuilds each function from f.func.__code__"
        )
        assert isinstance(py.__annotations__, dict) and py.__annotations__, name
    own = [n for n, f in funcs.items() if f.func.__module__ == solver.__name__]
    assert {"solve_contacts", "start_row"} <= set(own), (
        "wp.Function.func.__module__ no longer names the defining module: specialize selects the "
        "functions to rebuild by it"
    )


def test_a_rebuilt_function_calls_the_helpers_of_its_new_globals():
    x = np.array([0.0, 1.0, -2.5, 4.0], np.float32)
    ten = _rebuild(_caller, _helper_times_ten, "warp_internals_gen_ten")
    minus = _rebuild(_caller, _helper_minus_three, "warp_internals_gen_minus")
    got_ten = _run(_kernel_calling(ten), x)
    got_minus = _run(_kernel_calling(minus), x)
    got_original = _run(_kernel_calling(_caller), x)
    msg = (
        "a Warp function rebuilt from f.func.__code__ with new globals (contact.specialize) "
        "does not call the helper of its new globals"
    )
    np.testing.assert_array_equal(got_ten, 2.0 * (10.0 * x), err_msg=msg)
    np.testing.assert_array_equal(
        got_minus, 2.0 * (x - 3.0), err_msg=msg + " (two rebuilds were not compiled apart)"
    )
    np.testing.assert_array_equal(
        got_original, 2.0 * (x + 1.0), err_msg="rebuilding a function replaced the original it was made from"
    )
    assert ten.func.__module__ == "warp_internals_gen_ten", "the rebuilt function is not in its new module"


# ---- CPU launches and the zero-stride scratch (contact.buffers.make_contact_data) ----------------


@wp.kernel(enable_backward=False)
def _take_a_ticket(counter: wp.array(dtype=wp.int32), ticket_out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    c = counter[0]  # no atomic: correct only if no other thread runs between the read and the write
    ticket_out[i] = c
    counter[0] = c + 1


@wp.kernel(enable_backward=False)
def _use_shared_scratch(scratch: wp.array2d(dtype=wp.float32), sum_out: wp.array(dtype=wp.float32)):
    w = wp.tid()
    for j in range(scratch.shape[1]):
        scratch[w, j] = float(w)
    s = float(0.0)
    for j in range(scratch.shape[1]):
        s += scratch[w, j]
    sum_out[w] = s


def _zero_stride_view(one: wp.array, n: int) -> wp.array:
    """As ``make_contact_data`` makes the CPU scratch: ``n`` envs over one env's memory."""
    return wp.array(
        ptr=one.ptr,
        dtype=one.dtype,
        shape=(n, *one.shape[1:]),
        strides=(0, *one.strides[1:]),
        device=one.device,
        deleter=lambda ptr, size, owner=one: None,
    )


def test_a_cpu_launch_runs_its_threads_one_after_another_in_order():
    n = 4096
    counter = wp.zeros(1, dtype=wp.int32, device="cpu")
    tickets = wp.zeros(n, dtype=wp.int32, device="cpu")
    cmd = wp.launch(_take_a_ticket, dim=n, inputs=[counter], outputs=[tickets], device="cpu", record_cmd=True)
    cmd.launch()
    assert np.array_equal(tickets.numpy(), np.arange(n)), (
        "a CPU launch no longer runs its threads one after another in tid order: the contact solver's "
        "scratch, shared by all envs on the CPU (contact.buffers.make_contact_data), would be overwritten "
        "by envs running at the same time"
    )
    one = wp.zeros((1, 37), dtype=wp.float32, device="cpu")
    scratch = _zero_stride_view(one, n)
    sums = wp.zeros(n, dtype=wp.float32, device="cpu")
    wp.launch(_use_shared_scratch, dim=n, inputs=[scratch], outputs=[sums], device="cpu")
    assert np.array_equal(sums.numpy(), 37.0 * np.arange(n, dtype=np.float32)), (
        "envs sharing one scratch through a zero-stride view see each other's writes"
    )
    assert one.numpy()[0, 0] == n - 1, "the zero-stride view does not alias its owner's memory"


def test_the_contact_solver_makes_its_cpu_scratch_as_checked_here():
    cd = buffers.make_contact_data(ContactSlots(), ContactSlots(), 4, 3, 1, 2, 3, [1.0], "cpu")
    assert cd.jac.shape == (4, 4, 2) and cd.jac.strides[0] == 0 and cd.jac.deleter is not None, (
        "make_contact_data's CPU scratch is no longer a zero-stride view with a deleter: update "
        "_zero_stride_view and the tests that use it"
    )
    assert cd.lam_prev.strides[0] != 0  # kept per env


def test_a_zero_stride_view_keeps_its_owner_alive():
    one = wp.zeros((1, 8), dtype=wp.float32, device=_device())
    owner = weakref.ref(one)
    view = _zero_stride_view(one, 5)
    assert view.shape == (5, 8) and view.strides == (0, 4), "wp.array(ptr=..., strides=...) changed"
    del one
    gc.collect()
    assert owner() is not None, (
        "a wp.array made from ptr= no longer keeps its deleter alive: the contact solver's CPU scratch "
        "views would outlive the memory they point to"
    )
    del view
    gc.collect()
    assert owner() is None, "the view's owner is never freed"


# ---- torch aliasing and recorded launches (solver.t, EnvRNG, the reach observation kernel) -----


@wp.kernel(enable_backward=False)
def _add(x: wp.array(dtype=wp.float32), y_out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y_out[i] = y_out[i] + x[i]


def test_torch_views_alias_warp_memory_and_recorded_launches_follow_them():
    dev = _device()
    a = wp.zeros(6, dtype=wp.float32, device=dev)
    t = wp.to_torch(a)
    assert t.data_ptr() == a.ptr, "wp.to_torch no longer aliases the array's memory (solver.t)"
    t += 1.0
    assert np.array_equal(a.numpy(), np.ones(6, np.float32)), "a write to wp.to_torch's tensor is lost"
    x = torch.arange(6, dtype=torch.float32, device=sc.device)
    y = torch.zeros(6, dtype=torch.float32, device=sc.device)
    wx, wy = wp.from_torch(x), wp.from_torch(y)
    assert wx.ptr == x.data_ptr() and wy.ptr == y.data_ptr(), "wp.from_torch no longer aliases the tensor"
    cmd = wp.launch(_add, dim=6, inputs=[wx], outputs=[wy], device=dev, record_cmd=True)
    assert isinstance(cmd, wp.Launch)
    cmd.launch()
    x.copy_(torch.full((6,), 10.0))  # in place, as the envs update the tensors a launch was recorded with
    cmd.launch()
    wp.synchronize_device(dev)
    expected = torch.arange(6, dtype=torch.float32) + 10.0
    assert torch.equal(y.cpu(), expected), (
        "a recorded launch no longer reads and writes the tensors it was recorded with at each .launch()"
    )


def test_a_packed_cpu_launch_runs_the_recorded_launch():
    """``host_threads.PackedLaunch`` calls a recorded CPU launch's entry point itself: it relies on
    ``wp.Launch.params`` holding the launch bounds and then each kernel argument packed as a ctypes
    value, on ``hooks.forward(bounds*, args*)`` taking a struct of those arguments in order, on
    ``set_param_at_index`` packing the new argument into ``params``, and on an array's packed value
    keeping its address in the field ``data`` (``set_array_data``)."""
    x = torch.arange(6, dtype=torch.float32)
    y, z = torch.zeros(6), torch.zeros(6)
    cmd = wp.launch(
        _add, dim=6, inputs=[wp.from_torch(x)], outputs=[wp.from_torch(y)], device="cpu", record_cmd=True
    )
    packed = host_threads.pack(cmd)
    assert isinstance(packed, host_threads.PackedLaunch), "a recorded CPU launch is no longer packed"
    packed.launch()
    packed.launch()
    assert torch.equal(y, 2 * x), "a packed launch no longer runs the kernel on the recorded arguments"
    packed.set_param_at_index(1, wp.from_torch(z))
    packed.launch()
    assert torch.equal(z, x) and torch.equal(y, 2 * x), "set_param_at_index no longer reaches a packed launch"
    cmd.launch()  # Warp's own launch of the same command: the same arguments
    assert torch.equal(z, 2 * x), "Warp's launch and the packed one no longer agree"
    w = torch.zeros(6)
    packed.set_array_data(1, w)
    packed.launch()
    cmd.launch()
    assert torch.equal(w, 2 * x) and torch.equal(z, 2 * x), "set_array_data no longer moves an array argument"
    for wrong in (torch.zeros(7), torch.zeros(6, dtype=torch.float64), torch.zeros(12)[::2]):
        with pytest.raises(ValueError, match="expected a tensor of shape"):
            packed.set_array_data(1, wrong)
    packed.launch()
    assert torch.equal(w, 3 * x), "a refused tensor moved the argument"


# ---- compiler flags and logging (step.cpu_compiler_flags, runtime.init) -------------------------


def test_cpu_compiler_flags_reach_the_compiler():
    base = wp.config.cpu_compiler_flags
    assert base is None or isinstance(base, str), "wp.config.cpu_compiler_flags is read by step.py"
    assert step.cpu_compiler_flags().endswith("-ffp-contract=fast -ffast-math")

    @wp.kernel(module="unique", module_options={"cpu_compiler_flags": "-fwarpgym-no-such-flag"})
    def bad_flags(x: wp.array(dtype=wp.float32)):
        x[wp.tid()] = 1.0

    x = wp.zeros(1, dtype=wp.float32, device="cpu")
    try:
        wp.launch(bad_flags, dim=1, inputs=[x], device="cpu")
        built = True
    except Exception:  # Warp raises a plain Exception when the CPU build fails
        built = False
    assert not built and x.numpy()[0] == 0.0, (
        "a kernel with an unknown flag in the module option cpu_compiler_flags was built: the option "
        "no longer reaches the CPU compiler, and step.cpu_compiler_flags' -ffast-math is ignored"
    )


def test_log_level_is_warps_switch_for_its_messages():
    assert isinstance(wp.config.log_level, int) and wp.LOG_INFO < wp.LOG_WARNING, (
        "wp.config.log_level / wp.LOG_WARNING changed: sim_core.init(debug=False) sets them"
    )
