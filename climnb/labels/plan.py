"""What an input allows to label: the classes, the variables each needs, the settings as they
apply to it and a note for each choice made (:func:`plan_labels`).

Examples
--------
>>> plan = plan_labels(["TMQ", "U850", "V850", "PSL"])
>>> plan.classes
('tropical_cyclone', 'atmospheric_river')
>>> plan_labels(["TMQ"]).summary.startswith("labelled: atmospheric_river")
True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from climnb.io.channels import CLASS_NAMES
from climnb.labels.config import LabelConfig

__all__ = ["CLASS_CHOICES", "Plan", "plan_labels", "required_variables"]

#: ``classes`` arguments: what the input supports, rivers, storms, or both.
CLASS_CHOICES = ("auto", "ar", "tc", "both")
_AR, _TC = CLASS_NAMES[2], CLASS_NAMES[1]


def required_variables(config: LabelConfig | None = None) -> tuple[str, ...]:
    """The variables that labelling both classes of the 16-channel CAM5 data with ``config``
    needs (other inputs: :func:`plan_labels`)."""
    config = config or LabelConfig()
    names = ["TMQ", "U850", "V850", "PSL", "T200", "T500", "PRECT"]
    if config.tc.thickness_rise_m is not None:
        names += ["Z200", "Z1000"]
    return tuple(names)


@dataclass(frozen=True)
class Plan:
    """What an input allows: the classes to label, the variables used, the settings as they
    apply to this input, one note per choice made (which river method, why a class was
    skipped) and the checks storms are found by (which ran, which were skipped)."""

    classes: tuple[str, ...]
    variables: tuple[str, ...]
    config: LabelConfig
    notes: tuple[str, ...]
    storm_checks: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """One line: the classes labelled and the notes."""
        return f"labelled: {', '.join(self.classes)}; " + "; ".join(self.notes)


def _river_plan(have: set[str], config: LabelConfig):
    """(variables, ARConfig, note) for rivers, or (None, None, why not)."""
    ar = config.ar
    transport = [v for v in (("IVTU", "IVTV"), ("IVT",)) if set(v) <= have]
    proxy = {"TMQ", "U850", "V850"} <= have
    if ar.method in ("auto", "transport") and (transport or proxy):
        names = transport[0] if transport else ("TMQ", "U850", "V850")
        level = ar.ivt_threshold if transport else ar.proxy_threshold
        thr = f"IVT >= {level:g} kg m-1 s-1" + (
            f" or the {ar.ivt_percentile:g}th percentile of each point" if ar.ivt_percentile else ""
        )
        src = "+".join(names) if transport else "the proxy TMQ x |V850|"
        return names, replace(ar, method="transport"), f"rivers from transport ({src}; {thr})"
    ar = replace(ar, method="moisture")
    if transport and (ar.edge == "percentile" or "TMQ" in have) and ar.field == "ivt":
        names = transport[0] + (("TMQ",) if ar.edge == "half_max" else ())
        return names, ar, f"rivers from the {ar.percentile:g}th percentile of IVT"
    if proxy and ar.field == "ivt":
        note = f"rivers from the {ar.percentile:g}th percentile of the IVT proxy TMQ x |V850|"
        return ("TMQ", "U850", "V850"), ar, note
    if "TMQ" in have:
        why = "" if ar.field == "tmq" else " (no 850 hPa winds or IVT)"
        return ("TMQ",), replace(ar, field="tmq"), f"rivers from TMQ{why}"
    return None, None, "no rivers: no IVT, IVTU+IVTV, or TMQ in the input"


def _storm_plan(have: set[str], config: LabelConfig):
    """(variables, TCConfig, note, checks) for storms, or (None, None, why not, ())."""
    tc = config.tc
    vort = ("VORT850",) if "VORT850" in have else ("U850", "V850")
    missing = [v for v in (*vort, "PSL") if v not in have]
    if missing:
        lacks = "VORT850 (or U850 and V850)" if "VORT850" in missing or "U850" in missing else ""
        lacks = ", ".join([lacks] * bool(lacks) + [m for m in missing if m == "PSL"])
        return None, None, f"no storms: the input lacks {lacks}", ()
    names = [*vort, "PSL"]
    source = "VORT850 as given" if vort == ("VORT850",) else "U850, V850"
    checks = [
        f"cyclonic vorticity ({source}) >= {tc.min_vorticity:g} s-1",
        f"closed low: PSL rises {tc.pressure_rise_pa:g} Pa within {tc.pressure_rise_deg:g} deg",
    ]
    if {"T200", "T500"} <= have:
        names += ["T200", "T500"]
        checks.append(f"warm core: (T200 + T500) / 2 {tc.warm_core_k:g} K above its ring")
    else:
        checks.append(
            "warm core skipped (no T200, T500): centres within "
            f"{min(tc.max_abs_lat, tc.max_abs_lat_no_warm_core):g} deg of the equator"
        )
    if tc.thickness_rise_m is not None:
        if {"Z200", "Z1000"} <= have:
            names += ["Z200", "Z1000"]
            checks.append(f"thickness: Z200 - Z1000 {tc.thickness_rise_m:g} m above its ring")
        else:
            checks.append("thickness check skipped (no Z200, Z1000)")
    wind = next((p for p in (("U850", "V850"), ("UBOT", "VBOT")) if set(p) <= have), None)
    names += list(wind or ())
    checks.append(f"max wind from {', '.join(wind)}" if wind else "no max wind (no winds)")
    usable = {"TMQ", "PRECT", "vorticity", "psl"} & have | {"vorticity", "psl"}
    usable |= {"wind"} if wind else set()
    fields = tuple(f for f in tc.mask_fields if f in usable) or tc.fallback_mask_fields
    checks.append(f"masks from {', '.join(fields)}")
    note = "storms by " + (
        "vorticity, pressure and warm core"
        if "T200" in names
        else "vorticity and pressure (no warm-core check)"
    )
    if fields != tc.mask_fields:
        note += f", masks from {', '.join(fields)} only"
    names += [f for f in fields if f in ("TMQ", "PRECT")]
    return tuple(dict.fromkeys(names)), replace(tc, mask_fields=fields), note, tuple(checks)


def plan_labels(
    available: Iterable[str], config: LabelConfig | None = None, classes: str = "auto"
) -> Plan:
    """Decide what to label from the variables ``available`` (climnb names).

    Parameters
    ----------
    available : variable names of the (canonicalised) input.
    config : the settings (default :class:`LabelConfig`).
    classes : ``"auto"`` (whatever the input supports), ``"ar"``, ``"tc"`` or ``"both"``.

    Raises
    ------
    ValueError
        When a class asked for, or with ``"auto"`` any class, cannot be labelled from the
        input; the message says what is missing.
    """
    if classes not in CLASS_CHOICES:
        raise ValueError(f"classes must be one of {', '.join(CLASS_CHOICES)}, got {classes!r}")
    config = config or LabelConfig()
    have = set(map(str, available))
    want = {"auto": (_TC, _AR), "ar": (_AR,), "tc": (_TC,), "both": (_TC, _AR)}[classes]
    ar_vars, ar_config, ar_note = _river_plan(have, config) if _AR in want else (None, None, "")
    tc_vars, tc_config, tc_note, checks = (
        _storm_plan(have, config) if _TC in want else (None, None, "", ())
    )
    failed = [
        n
        for c, v, n in ((_AR, ar_vars, ar_note), (_TC, tc_vars, tc_note))
        if c in want and v is None
    ]
    if failed and (classes != "auto" or len(failed) == len(want)):
        raise ValueError(
            f"cannot label {'/'.join(want) if classes != 'auto' else 'anything'}: "
            + "; ".join(failed)
            + f"; found {', '.join(sorted(have)) or 'no variables'}; map a variable of another "
            "name with --rename NAME=TARGET (variables={'NAME': 'TARGET'})"
        )
    labelled = tuple(c for c, v in ((_TC, tc_vars), (_AR, ar_vars)) if v is not None)
    notes = [n for n in (tc_note, ar_note) if n]
    notes += [f"{c} not asked for" for c in (_TC, _AR) if c not in want]
    names = tuple(dict.fromkeys((tc_vars or ()) + (ar_vars or ())))
    config = replace(config, ar=ar_config or config.ar, tc=tc_config or config.tc)
    return Plan(labelled, names, config, tuple(notes), checks if tc_vars else ())
