"""`peagle models`: the supported models and their P-EAGLE defaults."""

from __future__ import annotations

import typer

from .common import JsonOpt, run


def register(app: typer.Typer) -> None:
    app.command("models")(models)


def models(json_output: JsonOpt = False) -> None:
    """List the four supported models: alias, JumpStart id, default instance, K, drafter, gating."""

    def body(out):
        from ..catalog import load_catalog

        entries = list(load_catalog().values())

        def human(console):
            from ..output import print_table

            rows = []
            for e in entries:
                mark = lambda field: "*" if not e.is_verified(field) else ""  # noqa: E731
                rows.append([e.alias, e.model_id + mark("model_id"),
                             e.default_instance_type + mark("default_instance_type"), str(e.default_k),
                             str(e.max_k) + mark("max_k"), "EULA" if e.gated else "no",
                             (e.drafter_repo or "none public") + mark("drafter_repo"),
                             f"{e.dflash.repo}@{e.dflash.revision}*" if e.dflash else "none"])
            print_table(console, ("alias", "JumpStart model id", "instance", "K", "max K", "gated", "drafter head",
                                  "DFlash drafter (--mode dflash)"),
                        rows, title="P-EAGLE models (* = unverified, see --json)")

        out.result({"models": entries}, human)

    run(json_output, body)
