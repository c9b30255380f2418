"""The readable summaries ``normlab calibrate`` and ``normlab predict --probe`` print without
``--json`` (plain Python on the summary dicts; no NumPy)."""

from __future__ import annotations

from .prediction.wording import strength_meanings

__all__ = ["format_summary", "format_probe_summary", "strength_meanings"]


#: Short names of the published archives' LLMs (``--llm``) -> their ``model`` run column.
_LLM_ALIASES = {
    "llama3": "Llama-3-70B-Instruct", "llama3_70b": "Llama-3-70B-Instruct",
    "llama31": "Llama-3.1-70B-Instruct", "llama31_70b": "Llama-3.1-70B-Instruct",
}



def _num(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and v != v):  # NaN: not observed
        return "-"
    if isinstance(v, (int, float)) and abs(v) < 1e9 and float(v) == int(v):
        return str(int(v))
    return f"{v:.{digits}g}"


def _p(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _interval(d: dict, none_text: str) -> str:
    """``est [low, high]`` of a summary entry; ``None`` ends become ``none_text``."""
    est, lo, hi = d.get("estimate"), d.get("low"), d.get("high")
    if est is None:
        return none_text
    return f"{_num(est)} [{_num(lo) if lo is not None else none_text}, {_num(hi) if hi is not None else none_text}]"


_RIVAL_NAMES = (("normlab", "normlab"), ("direction_rule", "direction rule"),
                ("logistic", "committed-fraction logistic"), ("base_rate", "base rate of the fit runs"),
                ("coin", "coin (every outcome equally likely)"))


def _bl(b, lg) -> str:
    return f"Brier {'-' if b is None else f'{b:.3f}'}, log {'-' if lg is None else f'{lg:.3f}'}"


def _coverage_text(cov: dict) -> str:
    bits = []
    for kind in ("experiment", "underlying"):
        if cov.get(kind) is None:
            continue
        zw = cov.get(f"zero_width_{kind}")
        n = cov[f"n_{kind}"]
        other = cov.get(f"{kind}_other")
        tail = ""
        if zw is not None:
            n_other = n - int(round(zw * n))
            tail = f" ({zw:.0%} zero-width" + (f"; {other:.0%} of the other {n_other}" if other is not None and zw > 0
                                               else "") + ")"
        bits.append(f"{kind} {cov[kind]:.0%} of {n}{tail}")
    return ", ".join(bits)


def _fractions_text(fc) -> str:
    if not fc:
        return ""
    n = fc.get("n", 0)
    return ", ".join(f"{lab.split(' (')[0]} {int(round(fc[k] * n))}/{n}" for k, lab in _RIVAL_NAMES if k in fc)


def _scores_text(sc: dict) -> str:
    """The ``scores`` block as readable lines: normlab beside its rivals on the same runs (lower
    Brier and log scores are better), coverage with its zero-width share, where a rival wins."""
    ref = sc.get("reference") or {}
    rv = sc.get("rivals") or {}
    out = ["scores on the runs the fit did not use, beside rivals on the same runs (lower is better):"]
    if sc.get("n_flip_runs"):
        out.append(f"  flips, {sc['n_flip_runs']} committed-minority runs (within {sc.get('within_rounds')} rounds):")
        for key, lab in _RIVAL_NAMES:
            if key == "base_rate":
                continue
            if key == "normlab":
                b, lg, how = sc["brier_flip"], sc["log_score_flip"], None
            elif key == "coin":
                b, lg, how = ref.get("brier_flip", 0.25), ref.get("log_score_flip", 0.693), None
            else:
                d = rv.get(key) or {}
                b, lg, how = d.get("brier_flip"), d.get("log_score_flip"), d.get("how") or d.get("unavailable")
            out.append(f"    {lab + ':':<38} {_bl(b, lg)}" + (f"  [{how}]" if how else ""))
        for d in sc.get("by_direction") or []:
            conv = f", the {d['convention']} convention" if d.get("convention") else ""
            parts = [f"{lab.split(' (')[0]} {_bl(d['brier'].get(k), d['log_score'].get(k))}"
                     for k, lab in _RIVAL_NAMES if k in d["brier"]]
            out.append(f"    from a consensus on {d['majority']}{conv}, {d['n_flip_runs']} runs: " + "; ".join(parts))
    if sc.get("n_consensus_runs"):
        br = rv.get("base_rate") or {}
        out.append(f"  consensus winners, {sc['n_consensus_runs']} runs: normlab "
                   f"{_bl(sc['brier_consensus'], sc['log_score_consensus'])}; base rate of the fit runs "
                   f"{_bl(br.get('brier_consensus'), br.get('log_score_consensus'))}"
                   + (f" [{br.get('how') or br.get('unavailable')}]" if br.get("how") or br.get("unavailable") else "")
                   + f"; coin {_bl(ref.get('brier_consensus', 0.0), ref.get('log_score_consensus', 0.0))}")
    cov = sc.get("coverage") or {}
    pct = int(round(100 * float(sc.get("level") or 0.95)))
    txt = _coverage_text(cov)
    if txt:
        out.append(f"  observed values inside normlab's {pct}% intervals: {txt} (experiment: what an experiment of "
                   "the observed size would report; zero-width: an interval that is one value, for a fraction 0 or 1)")
        for d in sc.get("by_direction") or []:
            t = _coverage_text(d.get("coverage") or {})
            if t:
                out.append(f"    from a consensus on {d['majority']}: {t}")
        t = _coverage_text(sc.get("winners_coverage") or {})
        if t and sc.get("by_direction"):
            out.append(f"    consensus winners: {t}")
    fc = sc.get("fraction_coverage") or {}
    for tgt, what in (("flip", "flip fractions per count"), ("consensus", "winner shares")):
        t = _fractions_text(fc.get(tgt))
        if t:
            out.append(f"  {what} inside each forecaster's {pct}% experiment interval (a rival's: binomial at its "
                       f"probability): {t}")
    wins = sc.get("rival_wins")
    if wins is not None:
        out.append("  where a rival scores better than normlab:" + ("" if wins else " nowhere"))
        out += [f"    {w}" for w in wins]
    ex = sc.get("excluded") or {}
    if ex:
        out.append("  not scored: " + ", ".join(f"{v} {k}" for k, v in ex.items()))
    return "\n".join(out)


def _wrap(text: str, indent: str = "      ", width: int = 118) -> list[str]:
    """A long line as lines of at most ``width`` characters, continuation lines indented."""
    import textwrap

    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_on_hyphens=False) or [text]


def _asymmetry_lines(a: dict) -> list[str]:
    """The asymmetry under relabelling in words: the name the fit favours, by how much (always a
    positive amount), and what the number is. ``post_bias_visits`` is the bias towards ``a``
    (negative: towards ``b``)."""
    x, y = a.get("a"), a.get("b")
    v, lo, hi = a.get("post_bias_visits"), a.get("post_bias_low"), a.get("post_bias_high")
    what = ("(p(name | memory) minus p(other name | the mirrored memory, names swapped), averaged over memory "
            "states weighted by how often the runs visited them; 0 = symmetric)")
    if v is None:
        out = [f"asymmetry between {x} and {y}: no posterior summary"]
    elif lo is not None and hi is not None and lo <= 0 <= hi:
        out = [f"asymmetry: no clear preference between {x} and {y}: towards {x} by {_num(v)} "
               f"[{_num(lo)}, {_num(hi)}]", "  " + what + ";"]
    else:
        if v < 0:
            x, y, v, lo, hi = y, x, -v, (None if hi is None else -hi), (None if lo is None else -lo)
        out = [f"asymmetry: the fitted strategy favours {x} over {y} by {_num(v)} [{_num(lo)}, {_num(hi)}]",
               "  " + what + ";"]
    out.append(f"  {a.get('n_significant')} of {a.get('n_pairs_tested')} tested state pairs differ significantly "
               "(Fisher's exact test, 5%)")
    return out


def format_summary(s: dict) -> str:
    """The readable multi-line summary ``normlab calibrate`` prints without ``--json``.

    Every ``null`` of the JSON is spelled out: a critical mass that is ``null`` was not reached
    with up to N - 1 committed agents; rounds to 95% success that are ``null`` were not reached
    within the simulated rounds.
    """
    names = s.get("names") or []
    N = s.get("n_agents")
    lines = []
    head = f"{s.get('llm') or 'strategy table'}: names {','.join(map(str, names))}, memory H = {s.get('memory')}, N = {N}"
    lines.append(head)
    fit = s.get("fit") or {}
    if s.get("source"):
        lines.append(f"data: {s['source']}")
    bits = [f"{s.get('model')}" + (f" on {s['fit_on']} runs" if s.get("fit_on") else "")]
    if fit.get("runs") is not None:
        bits.append(f"{fit['runs']} runs")
    if fit.get("decisions") is not None:
        bits.append(f"{int(fit['decisions']):,} decisions")
    if fit.get("states_observed") is not None:
        bits.append(f"{fit['states_observed']} of {fit['states_total']} memory states observed")
    lines.append("fit: " + ", ".join(bits))
    dg = fit.get("diagnostics") or {}
    if dg:
        div = int(dg.get("divergences") or 0)
        ess = dg.get("ess_bulk_min")
        lines.append(f"sampler: R-hat max {_num(dg.get('r_hat_max'), 4)}, bulk ESS min {_num(None if ess is None else round(ess))}, "
                     f"{div} divergent transition{'s' if div != 1 else ''}"
                     + (" (see the warning above)" if div else ""))
    re_ = s.get("run_effects") or (s.get("settings") or {}).get("run_effects_summary")
    if re_ and re_.get("active"):
        sb, sk = re_.get("sd_b") or {}, re_.get("sd_k") or {}
        how = {"joint": "sampled with the table", "marginal": "estimated beside the table"}.get(re_.get("kind"), "")
        mean = ""
        if re_.get("kind") == "marginal" and (re_.get("mu_k") or {}).get("estimate") is not None:
            mean = (f"; the average run against the table: shift {_num(re_['mu_b']['estimate'])}, log-sharpness "
                    f"{_num(re_['mu_k']['estimate'])} (p {_num(re_.get('p_mean'))}), played as a correction of it")
        lines += _wrap(f"runs differ{' (' + how + ')' if how else ''}: sd of a run's shift {_num(sb.get('estimate'))} "
                       f"[{_num(sb.get('low'))}, {_num(sb.get('high'))}] and of its log-sharpness "
                       f"{_num(sk.get('estimate'))} [{_num(sk.get('low'))}, {_num(sk.get('high'))}] on the logit of the "
                       f"table (likelihood ratio {_num(re_.get('lr_statistic'))} against identical runs, p "
                       f"{_num(re_.get('p_value'))}){mean}; every simulated run plays its own", indent="  ")
    elif re_ and re_.get("note"):
        lines += _wrap(f"runs differ: not estimated ({re_['note']}); every simulated run plays the same table", "  ")
    settings = s.get("settings") or {}
    max_rounds = settings.get("max_rounds")
    obs = s.get("observed") or {}
    base = obs.get("baseline") or {}
    if base and base.get("n_agents") != N:
        base = {}
    pct = int(round(100 * float(s.get("level") or 0.95)))
    lines.append("")
    lines.append(f"predicted (median and {pct}% interval over {s.get('draws')} posterior draws)"
                 + ("; observed in the data" if base else "") + ":")
    rows = []
    pci = s.get("p_consensus_interval") or {}
    for nm in names:
        p = (s.get("p_consensus") or {}).get(nm)
        iv = pci.get(nm) or [None, None]
        o = (base.get("p_consensus") or {}).get(nm) if base else None
        rows.append((f"P(consensus on {nm})", f"{_p(p)} [{_p(iv[0])}, {_p(iv[1])}]",
                     "" if o is None else f"observed {_p(o)}"))
    rows.append(("P(no consensus)", _p(s.get("p_no_consensus")), ""))
    not_reached = "not reached" + (f" within {max_rounds} rounds" if max_rounds else "")
    r95 = s.get("rounds_to_95") or {}
    extra = ""
    if r95.get("p_not_reached"):
        extra = f" ({_num(100 * r95['p_not_reached'])}% of draws: {not_reached})"
    rows.append(("rounds to 95% success", _interval(r95, not_reached) + extra,
                 f"observed {_num(base.get('rounds_to_95'))}" if base else ""))
    cr = s.get("consensus_rounds") or {}
    rows.append(("rounds to consensus", _interval(cr, not_reached),
                 f"observed {_num(base.get('streak_rounds'))}" if base else ""))
    w = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    lines += [f"  {a:<{w}}  {b:<{w2}}  {c}".rstrip() for a, b, c in rows]

    cm = s.get("critical_mass") or {}
    if cm:
        lines.append("")
        lines.append(f"critical mass: committed agents that overturn a consensus (N = {N}) -- published: the authors'")
        lines.append(f"ensemble rule; per-run: half the runs flip within {s.get('within_rounds')} rounds "
                     "(median [interval] over draws):")
        none_cm = f"not reached with up to {N - 1} committed" if N else "not reached"
        ocm = obs.get("critical_mass") or {}
        for key, e in cm.items():
            maj, ch = e.get("majority"), e.get("challenger")
            pub, per = e.get("published") or {}, e.get("per_run") or {}
            ex = e.get("experiment")
            if ex:
                des = ex.get("design") or {}
                dist = ex.get("distribution") or {}
                top = sorted(dist.items(), key=lambda kv: -kv[1])[:4]
                lines += _wrap(f"  {key} ({ch} committed against a consensus on {maj}), on the design of the data's "
                               f"committed runs: published {_interval(ex, none_cm)}")
                lines += _wrap(f"      design: counts {', '.join(map(str, des.get('counts', [])))}, runs per count "
                               f"{'/'.join(str(len(x)) for x in des.get('lengths', []))}, window {des.get('window')} "
                               f"rounds; most likely readings " + ", ".join(f"{k} ({_p(v)})" for k, v in top)
                               + (f"; {_p(ex.get('p_beyond_tested'))} of draws past the last tested count"
                                  if ex.get("p_beyond_tested") else ""))
                txt = f"      paper's design (10 runs at every count): published {_interval(pub, none_cm)}; " \
                      f"per-run {_interval(per, none_cm)}"
            else:
                txt = f"  {key} ({ch} committed against a consensus on {maj}): published {_interval(pub, none_cm)}; " \
                      f"per-run {_interval(per, none_cm)}"
            lines.append(txt)
            o = ocm.get(key)
            if o:
                op, orr = o.get("published") or {}, o.get("per_run") or {}
                ot = f"observed at counts {o.get('counts')}: " if o.get("counts") else "observed: "
                ot += "published " + (_num(op.get("estimate")) if op.get("estimate") is not None
                                      else "not reached at the observed counts")
                ot += "; first count where half the runs flip " + (
                    _num(orr.get("first_count")) if orr.get("first_count") is not None else "none observed")
                lines.append("      " + ot)
            for crit, d in (("published", pub), ("per-run", per)):
                p_nr = d.get("p_not_reached")
                if p_nr:
                    lines.append(f"      {crit}: {_num(100 * p_nr)}% of draws did not flip with up to {N - 1} "
                                 "committed agents")
    ds = s.get("decisive_states") or {}
    if ds:
        lines.append("")
        lines += _wrap("the memory states that decide each prediction (share of its spread from each state's posterior "
                       "uncertainty; [decisions in the data]):", "")
        for key, d in ds.items():
            tops = ", ".join(f"{st['state'] or '(empty)'} [{st['decisions']}] {_p(st['share'])}"
                             for st in (d.get("states") or [])[:3])
            lines += _wrap(f"  {key}: {tops}; {_p(d.get('thin_share'))} rests on states with fewer than "
                           f"{d.get('thin_decisions')} decisions")
    rs = s.get("relative_strength") or {}
    if rs:
        lines.append("")
        lines.append("relative strength of each name's consensus X (median [interval]):")
        for nm, q in rs.items():
            lines.append(f"  {nm}: " + ", ".join(f"{k} {_interval(v, '-')}" for k, v in q.items()))
        meanings = strength_meanings(s.get("within_rounds"))
        for k in dict.fromkeys(k for q in rs.values() for k in q):
            if k in meanings:
                lines.append(f"    {k}: {meanings[k]}")
    sc = s.get("scores")
    if sc:
        lines.append("")
        lines.append(_scores_text(sc))
    a = s.get("asymmetry")
    if a:
        lines.append("")
        lines += _asymmetry_lines(a)
    if s.get("out"):
        lines.append("")
        lines.append(f"saved in {s['out']}: summary.json, predictions.parquet, the fit and the simulations "
                     "(normlab.load reads it back)")
    if s.get("seconds") is not None:
        lines.append("")
        lines.append(f"done in {_num(s['seconds'])} s; --json prints every number (flip curves, settings)")
    else:
        lines.append("")
        lines.append("--json prints every number (flip curves, settings)")
    return "\n".join(lines)


def _iv(d) -> str:
    return _interval(d or {}, "not reached")


def format_probe_summary(s: dict) -> str:
    """The readable summary: ``normlab calibrate``'s, then the probe's cost, the table's uncertainty
    and the underlying intervals."""
    text = format_summary(s).rsplit("\n\n", 1)[0].replace("posterior draws", "table draws")
    lines = [text.replace("fit: probe, ", "table: exact probe of ")]
    pr = s.get("probe") or {}
    c, t = pr.get("cost") or {}, pr.get("table") or {}
    lines.append("")
    lines.append(f"probe: {c.get('decisions')} (state, order) prompts; {c.get('requests_now')} requests now "
                 f"({c.get('prompt_tokens_now'):,} prompt tokens), {c.get('cache_hits')} prompts answered from")
    lines.append(f"  the journal or a cache; {c.get('probe_seconds')} s; prediction {c.get('predict_seconds')} s")
    j = c.get("jitter") or {}
    lines.append(f"uncertainty: covered mass mean {t.get('covered_mass_mean', 0):.2f} (min {t.get('covered_mass_min', 0):.3f}); "
                 f"name-order spread up to {t.get('order_spread_max', 0):.2f} (mean {t.get('order_spread_mean', 0):.2f});")
    lines.append(f"  endpoint jitter sd {j.get('jitter_sd', 0):.2g} (logprob; {j.get('prompts', 0)} prompts re-asked without "
                 "the cache)")
    u = s.get("underlying")
    if u:
        lines.append("")
        lines.append(f"underlying values ({u.get('runs_per_draw')} runs per draw, {u.get('draws')} draws: the table's "
                     "own uncertainty):")
        pci = u.get("p_consensus_interval") or {}
        for nm, p in (u.get("p_consensus") or {}).items():
            iv = pci.get(nm) or [None, None]
            lines.append(f"  P(consensus on {nm}) {p:.3f} [{_num3(iv[0])}, {_num3(iv[1])}]")
        lines.append(f"  rounds to 95% success {_iv(u.get('rounds_to_95'))}; rounds to consensus "
                     f"{_iv(u.get('consensus_rounds'))}")
        for k, v in (u.get("critical_mass_per_run") or {}).items():
            lines.append(f"  {k} per-run {_iv(v)}")
    lines.append("")
    lines.append("--json prints every number")
    return "\n".join(lines)


def _num3(v) -> str:
    return "-" if v is None else f"{v:.3f}"
