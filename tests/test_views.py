"""sim_core's Warp views for user kernels (``sim_core.views``): a kernel that resets an env, moves a
body or changes its parameters leaves the scene as the host API would, and the simulator's derived
data (poses, the contacts a step starts from) follows."""

from __future__ import annotations

import torch
import warp as wp

import sim_core as sc
from sim_core.views import ContactsView, ParamsView, ResetView, StateView, env_error, mark_changed, reset_env

CUBE = 0.05  # edge, m


def _arm_and_cube(n_envs: int):
    scene = sc.Scene(profiling_options=sc.ProfilingOptions(show_FPS=False))
    scene.add_entity(sc.morphs.Plane())
    arm = scene.add_entity(sc.morphs.MJCF(file="franka_panda"))
    cube = scene.add_entity(
        sc.morphs.Box(size=(CUBE,) * 3, pos=(0.5, 0.0, CUBE / 2)), material=sc.materials.Rigid(rho=1000.0)
    )
    scene.build(n_envs=n_envs)
    return scene, arm, cube


@wp.kernel(enable_backward=False)
def _reset_kernel(r: ResetView, mask: wp.array(dtype=wp.bool)):
    e = wp.tid()
    if mask[e]:
        reset_env(r, e)


@wp.kernel(enable_backward=False)
def _move_kernel(s: StateView, q0: int, d0: int, mask: wp.array(dtype=wp.bool), pos: wp.vec3):
    e = wp.tid()
    if mask[e]:
        for j in range(3):
            s.qpos[e, q0 + j] = pos[j]
        for j in range(6):
            s.qvel[e, d0 + j] = 0.0
        mark_changed(s, e)


@wp.kernel(enable_backward=False)
def _error_kernel(s: StateView, c: ContactsView, out: wp.array(dtype=wp.bool)):
    e = wp.tid()
    out[e] = env_error(s.qpos, s.qvel, c.overflow, e)


@wp.kernel(enable_backward=False)
def _friction_kernel(p: ParamsView, geom: int, value: float):
    e = wp.tid()
    p.geom_friction[e, geom] = value + float(e)


def _stir(scene, arm, steps=30):
    """Random arm targets and an applied force for a while: controls, forces and contacts set."""
    g = torch.Generator().manual_seed(0)
    q = arm.get_dofs_position()
    arm.control_dofs_position(q + 0.3 * (torch.rand(q.shape, generator=g).to(q.device) - 0.5))
    scene.sim.rigid_solver.state.qfrc_applied[:, 0] = 1.0
    for _ in range(steps):
        scene.step()


def _snapshot(solver) -> dict[str, torch.Tensor]:
    groups = ("state", "params", "contacts")
    out = {f"{g}.{k}": v.clone() for g in groups for k, v in vars(getattr(solver, g)).items()}
    del out["contacts.jac"], out["contacts.jac_trees"]  # the solver's scratch, shared by envs on the CPU
    out["overflow"] = solver.get_contact_overflow().clone()
    return out


def _restore(solver, snap) -> None:
    for k, v in snap.items():
        if "." in k:
            group, name = k.split(".")
            getattr(getattr(solver, group), name).copy_(v)


def test_reset_env_in_a_kernel_equals_the_solvers_reset():
    scene, arm, _ = _arm_and_cube(3)
    solver = scene.sim.rigid_solver
    _stir(scene, arm)
    before = _snapshot(solver)
    mask = torch.tensor([False, True, False], device=sc.device)
    solver.reset(envs_idx=mask)
    by_api = _snapshot(solver)
    _restore(solver, before)
    wp.launch(_reset_kernel, dim=3, inputs=[solver.reset_view(), wp.from_torch(mask)], device=solver.wp_device)
    solver.state_changed_by_kernel()
    by_kernel = _snapshot(solver)
    for k, v in by_api.items():
        assert torch.equal(v, by_kernel[k]), k
    assert not torch.equal(by_api["state.qpos"][1], before["state.qpos"][1])  # env 1 was reset ...
    assert torch.equal(by_api["state.qpos"][[0, 2]], before["state.qpos"][[0, 2]])  # ... the others not
    scene.step()  # and steps on from there
    assert torch.isfinite(solver.get_qpos()).all()


def test_a_kernel_that_moves_a_body_and_marks_it_matches_the_setter():
    """The cube lifted 20 cm in env 0 by a kernel, and by ``set_pos``: after ``state_changed_by_kernel``
    the poses are the new ones and the next steps (fresh contacts) are bit for bit those of the setter."""
    runs = []
    for by_kernel in (False, True):
        scene, arm, cube = _arm_and_cube(2)
        solver = scene.sim.rigid_solver
        _stir(scene, arm, 10)
        target = torch.tensor([0.5, 0.0, 0.2])
        mask = torch.tensor([True, False], device=sc.device)
        if by_kernel:
            free = cube.joints[0]
            inputs = [
                solver.state_view(),
                free.qs_idx[0],
                free.dofs_idx[0],
                wp.from_torch(mask),
                wp.vec3(*target),
            ]
            wp.launch(_move_kernel, dim=2, inputs=inputs, device=solver.wp_device)
            solver.state_changed_by_kernel()
        else:
            cube.set_pos(target[None], envs_idx=[0])
        torch.testing.assert_close(cube.get_links_pos()[0, 0], target.to(sc.device))
        for _ in range(5):
            scene.step()
        runs.append(solver.get_qpos().clone())
    assert torch.equal(runs[0], runs[1])
    assert float(runs[1][0, arm.n_qs + 2]) > 0.1  # falling freely, not held on the floor's old contacts


def test_env_error_flags_non_finite_states():
    scene, arm, _ = _arm_and_cube(4)
    solver = scene.sim.rigid_solver
    solver.state.qvel[0, 3] = float("nan")
    solver.state.qpos[2, arm.q_start + 1] = float("inf")
    out = torch.zeros(4, dtype=torch.bool, device=sc.device)
    inputs = [solver.state_view(), solver.contacts_view(), wp.from_torch(out, dtype=wp.bool)]
    wp.launch(_error_kernel, dim=4, inputs=inputs, device=solver.wp_device)
    assert out.tolist() == [True, False, True, False]


def test_params_view_writes_per_env_parameters_and_the_entity_offsets():
    scene, arm, cube = _arm_and_cube(3)
    solver = scene.sim.rigid_solver
    assert (arm.dof_start, arm.q_start, arm.n_dofs) == (0, 0, 9)
    assert (cube.dof_start, cube.q_start) == (9, 9) and cube.inertial_slot == 0
    wp.launch(
        _friction_kernel, dim=3, inputs=[solver.params_view(), cube.geoms_idx[0], 0.5], device=solver.wp_device
    )
    assert cube.get_friction()[:, 0].tolist() == [0.5, 1.5, 2.5]
