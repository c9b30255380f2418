"""The compiled prediction engine (``predict(..., engine="kernel")``, the default): posterior
draws -> the design of every simulation of every draw -> one
:func:`normlab.theory.memory_game.strategy_design` call -> the tidy per-draw tables of a
:class:`~normlab.calibration.Prediction`.

The seed words of all runs are derived at once: run ``k`` of seed group ``g`` (consensus; each
committed count; each strength setting, in that order) of draw ``d`` is child ``k`` of child ``g``
of child ``d`` of the prediction's seed -- the seeds the reference engine
(:mod:`normlab.calibration.prediction.engine_reference`) gives its ``strategy_game`` calls, so both
simulate the same runs. The reductions (winners, flip readings, the published rule, mixtures)
happen inside the kernel; :func:`_frames_from_design` only lays its arrays out as tables.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1, Fig. 2B,
Fig. 3, Table S3, Methods "Committed Minorities", Supplementary Text "Characterizing Relative
Strength".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normlab._rng import descendant_seed_words
from normlab.theory.criteria import FLIP_SUM
from normlab.theory.design import strategy_design

from ..fit.run_effects import run_effect_values
from .readings import NONE, WIDTH_FRACTIONS, _basin_boundary
from .result import EXPERIMENT_CM_COLUMNS, EXPERIMENT_COLUMNS, EXPERIMENT_SHARE_COLUMNS

__all__ = []


def _design_layout(cfg):
    """Runs per seed group of one draw, in the order :func:`_simulate_draw` consumes its children
    (consensus; per direction one group per committed count, then 2 + len(WIDTH_FRACTIONS)
    strength groups; then, with experiment designs, one group per count of each design's grid)."""
    sizes = [cfg["n_runs_consensus"]] if cfg["consensus"] else []
    nsim = max(cfg["n_runs_flip"], cfg["design_runs"])
    for _ in cfg["directions"]:
        sizes += [nsim] * len(cfg["committed"])
        if cfg["strength"]:
            sizes += [cfg["n_runs_flip"]] * (2 + len(WIDTH_FRACTIONS))
    for des in cfg.get("designs") or ():
        sizes += [len(L) for _, L, _ in des.grid()]
    return np.asarray(sizes, np.int64)


def _experiment(cfg, names):
    """The kernel's experiment plan for the designs of ``cfg`` (None without designs): one entry
    per count of each design's grid, the runs of the tested counts kept."""
    designs = cfg.get("designs") or ()
    if not designs:
        return None
    windows = {d.window for d in designs}
    if len(windows) > 1:
        raise ValueError(f"the designs of one prediction share the published rule's window; got {sorted(windows)}")
    e_dir, counts, runs, lengths, tested, stop = [], [], [], [], [], []
    for i, des in enumerate(designs):
        for c, L, t in des.grid():
            stop.append(3 if des.stop == "streak" and c > 0 else 0)  # nobody committed: the consensus is a streak
            e_dir.append(i)
            counts.append(c)
            runs.append(len(L))
            lengths.extend(L)
            tested.append(t)
    return {"directions": [(names.index(d.majority), names.index(d.challenger)) for d in designs],
            "direction": e_dir, "counts": counts, "runs": runs, "lengths": lengths, "simulate_all": tested,
            "keep": tested, "window": windows.pop(), "max_rounds": max(d.max_rounds() for d in designs), "stop": stop}


def _effects(cfg, draw_ids, shape):
    """Per run of every group of every draw its run effect ``(b, kappa)`` (:mod:`.run_effects`), or
    None: draw ``d`` uses child ``d`` of the effects' seed, so chunks and executors do not matter.
    Every seed group of committed runs is one experiment cell (the runs of one count share a part
    ``omega`` of the effects); the convergence runs are independent runs, as the fitted runs the
    effects were estimated from are read (their spread is the whole between-run spread): each
    plays its own draw of the whole covariance (drawn after the cells', which keep their values)."""
    draws = cfg.get("effect_draws")
    if draws is None:
        return None
    ss = cfg["effect_seed"]
    sizes = _design_layout(cfg)
    n_cons = int(sizes[0]) if cfg["consensus"] else 0
    D, G, M = shape
    b = np.zeros((D, G * M))
    k = np.ones((D, G * M))
    at = _slots(sizes, M)  # run k of group g at g * M + k
    for a, d in enumerate(draw_ids):
        g = np.random.default_rng(np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (int(d),)))
        bb, kk = run_effect_values(draws[int(d)], sizes, rng=g)
        if n_cons:
            bb[:n_cons], kk[:n_cons] = run_effect_values(_whole(draws[int(d)]), np.ones(n_cons, np.int64), rng=g)
        b[a, at] = bb
        k[a, at] = kk
    return b.reshape(shape), k.reshape(shape)


def _slots(sizes, M):
    """Where run ``k`` of seed group ``g`` sits in a draw's ``(G, M)`` block, flattened (``g * M + k``),
    for the runs of every group in order."""
    g = np.repeat(np.arange(len(sizes)), sizes)
    return g * M + np.arange(len(g)) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def _whole(draw):
    """A draw of the effects with no cell share (``omega = 0``): every run its own whole effect."""
    w = np.array(draw, float, copy=True)
    w[5] = 0.0
    return w


def _design_seeds(parent, draw_ids, cfg):
    """Kernel seed words of every run of every draw in one vectorised derivation: run ``k`` of
    group ``g`` of draw ``d`` is child ``k`` of child ``g`` of child ``d`` of ``parent`` -- the
    seeds the reference engine's ``strategy_game`` calls use, so both engines simulate the same
    runs."""
    sizes = _design_layout(cfg)
    G, M = len(sizes), int(sizes.max(initial=1))
    draw_ids = np.asarray(draw_ids, np.int64)
    at = _slots(sizes, M)
    n = len(at)
    keys = np.column_stack([np.repeat(draw_ids, n), np.tile(at // M, len(draw_ids)), np.tile(at % M, len(draw_ids))])
    out = np.zeros((len(draw_ids), G * M, 4), np.uint64)
    out[:, at] = descendant_seed_words(parent, keys).reshape(len(draw_ids), n, 4)
    return out.reshape(len(draw_ids), G, M, 4)


def _run_design(tables, draw_ids, parent, cfg):
    """The kernel engine on a chunk of draws: one seed derivation, one compiled call."""
    names = cfg["names"]
    arr = np.stack([t.table for t in tables])
    N = cfg["n_agents"]
    dirs = [(names.index(x), names.index(y)) for x, y in cfg["directions"]]
    seeds = _design_seeds(parent, draw_ids, cfg)
    return strategy_design(
        arr, seeds, n_agents=N, memory=cfg["memory"], consensus=cfg["consensus"],
        n_cons=cfg["n_runs_consensus"], cons_rounds=cfg["max_rounds"], directions=dirs,
        counts=np.asarray(cfg["committed"], np.int64), n_flip=cfg["n_runs_flip"], n_design=cfg["design_runs"],
        within=cfg["within_rounds"], window=cfg["max_round"], monotone=cfg["assume_monotone"], level=cfg["level"],
        flip_sum=FLIP_SUM, strength=cfg["strength"],
        mix_kx=np.array([int(round(f * N)) for f in WIDTH_FRACTIONS], np.int64),
        experiment=_experiment(cfg, names), effects=_effects(cfg, draw_ids, seeds.shape[:3]),
        order_bias=cfg.get("order_bias", 0.0), name_order=cfg.get("name_order", ("independent", "shared")))


def _frames_from_design(o, draw_ids, names, cfg):
    """The tidy tables of a :class:`Prediction` from :func:`_run_design`'s arrays (vectorised)."""
    D = len(draw_ids)
    draws = np.asarray(draw_ids, np.int64)
    W = len(names)
    dirs = cfg["directions"]
    counts = np.asarray(cfg["committed"], np.int64)
    nd, nc = len(dirs), len(counts)
    if cfg["consensus"]:
        nrc, R = cfg["n_runs_consensus"], cfg["max_rounds"]
        cons = pd.DataFrame({"draw": np.repeat(draws, W + 1),
                             "name": np.tile(np.array(list(names) + [NONE], dtype=object), D),
                             "runs": o["cons_wins"].reshape(-1), "n_runs": np.full(D * (W + 1), nrc, np.int64)})
        curve = o["cons_curve"]
        success = pd.DataFrame({"draw": np.repeat(draws, R), "round": np.tile(np.arange(1, R + 1), D),
                                "success_rate": curve.reshape(-1)})
        hit = curve >= 0.95 - 1e-9
        r95 = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.nan)
        st = o["cons_streak"]
        ok = ~np.isnan(st)
        n_ok = ok.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cr = np.where(n_ok > 0, np.where(ok, st, 0.0).sum(axis=1) / np.maximum(n_ok, 1), np.nan)
        stats = pd.DataFrame({"draw": draws, "rounds_to_95": r95, "consensus_rounds": cr, "converged": n_ok / nrc})
    else:
        cons = pd.DataFrame(columns=["draw", "name", "runs", "n_runs"])
        success = pd.DataFrame(columns=["draw", "round", "success_rate"])
        stats = pd.DataFrame(columns=["draw", "rounds_to_95", "consensus_rounds", "converged"])
    maj = np.array([x for x, _ in dirs], dtype=object)
    cha = np.array([y for _, y in dirs], dtype=object)
    flips = pd.DataFrame({"draw": np.repeat(draws, nd * nc), "majority": np.tile(np.repeat(maj, nc), D),
                          "challenger": np.tile(np.repeat(cha, nc), D), "committed": np.tile(counts, D * nd),
                          "n_runs": np.full(D * nd * nc, cfg["n_runs_flip"], np.int64),
                          "n_flips": o["fl_k"].reshape(-1), "simulated": o["fl_sim"].reshape(-1),
                          "published_last3": o["fl_last3"].reshape(-1), "published_success": o["fl_ok"].reshape(-1)})
    cmd = pd.DataFrame({"draw": np.repeat(draws, nd), "majority": np.tile(maj, D), "challenger": np.tile(cha, D),
                        "published": o["cm_pub"].reshape(-1), "per_run": o["cm_run"].reshape(-1)})
    scol = ["draw", "majority", "challenger", "width", "boundary", "pull", "exploration"] + \
        [f"p_win_{f:.3f}" for f in WIDTH_FRACTIONS]
    if cfg["strength"]:
        px = o["st_wins"] / cfg["n_runs_flip"]
        rows = []
        for a, d in enumerate(draws):
            for i, (x, y) in enumerate(dirs):
                p = px[a, i]
                b = _basin_boundary(p)
                sh = o["st_share"][a, i]
                rows.append((int(d), x, y, 1.0 - b, b, 1.0 - float(sh[1]), float(sh[0]), *(float(v) for v in p)))
        strg = pd.DataFrame(rows, columns=scol)
    else:
        strg = pd.DataFrame(columns=scol)
    return cons, success, stats, flips, cmd, strg, _experiment_frames(o, draws, cfg)


def _experiment_frames(o, draws, cfg) -> dict:
    """The experiment tables of a prediction: per draw and grid count whether the design's runs met
    the published rule; per draw the critical mass on the design's grid; per draw, kept run and
    round the simulated challenger share (the tested counts: what the data can be compared with)."""
    designs = cfg.get("designs") or ()
    if not designs:
        return {"experiment": pd.DataFrame(columns=list(EXPERIMENT_COLUMNS)),
                "experiment_cm": pd.DataFrame(columns=list(EXPERIMENT_CM_COLUMNS)),
                "experiment_shares": pd.DataFrame(columns=list(EXPERIMENT_SHARE_COLUMNS))}
    D = len(draws)
    ent = [(des, c, L, t) for des in designs for c, L, t in des.grid()]
    E = len(ent)
    ok = o["ex_ok"]
    exp = pd.DataFrame({"draw": np.repeat(draws, E),
                        "majority": np.tile(np.array([e[0].majority for e in ent], dtype=object), D),
                        "challenger": np.tile(np.array([e[0].challenger for e in ent], dtype=object), D),
                        "committed": np.tile(np.array([e[1] for e in ent], np.int64), D),
                        "tested": np.tile(np.array([e[3] for e in ent], bool), D),
                        "runs": np.tile(np.array([len(e[2]) for e in ent], np.int64), D),
                        "simulated": ok.reshape(-1) >= 0, "met": ok.reshape(-1) == 1,
                        "last3": o["ex_last3"].reshape(-1)})
    cm = pd.DataFrame({"draw": np.repeat(draws, len(designs)),
                       "majority": np.tile(np.array([d.majority for d in designs], dtype=object), D),
                       "challenger": np.tile(np.array([d.challenger for d in designs], dtype=object), D),
                       "critical_mass": o["ex_cm"].reshape(-1)})
    kept = [(des, c, k) for des, c, L, t in ent if t for k in range(len(L))]
    sh = o["ex_share"]  # (D, kept runs, rounds)
    R = sh.shape[2]
    n = len(kept)
    shares = pd.DataFrame({"draw": np.repeat(draws, n * R),
                           "majority": np.tile(np.repeat(np.array([x[0].majority for x in kept], dtype=object), R), D),
                           "challenger": np.tile(np.repeat(np.array([x[0].challenger for x in kept], dtype=object), R),
                                                 D),
                           "committed": np.tile(np.repeat(np.array([x[1] for x in kept], np.int64), R), D),
                           "run": np.tile(np.repeat(np.array([x[2] for x in kept], np.int64), R), D),
                           "round": np.tile(np.arange(1, R + 1), D * n), "share": sh.reshape(-1)})
    return {"experiment": exp, "experiment_cm": cm, "experiment_shares": shares[~np.isnan(shares["share"])]
            .reset_index(drop=True)}


def _design_chunk(tables, draw_ids, parent, cfg):
    """Kernel engine on a chunk of draws (module level so process executors can pickle it)."""
    return draw_ids, _run_design(tables, draw_ids, parent, cfg)


def _predict_kernel(tables, ids, parent, cfg, names, H, executor):
    """The kernel engine: all draws in one compiled call (or one per chunk on ``executor``)."""
    cfg = dict(cfg, names=tuple(names), memory=H)
    if executor is None:
        out = _run_design(tables, ids, parent, cfg)
    else:
        D = len(ids)
        n_chunks = max(1, min(D, 4 * int(getattr(executor, "_max_workers", 2) or 2)))
        parts = [p for p in np.array_split(np.arange(D), n_chunks) if len(p)]
        futs = [executor.submit(_design_chunk, [tables[i] for i in p], [ids[i] for i in p], parent, cfg)
                for p in parts]
        res = [f.result()[1] for f in futs]
        out = {k: np.concatenate([r[k] for r in res]) for k in res[0]}
    return _frames_from_design(out, ids, tuple(names), cfg)
