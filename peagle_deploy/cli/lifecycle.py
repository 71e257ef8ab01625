"""`peagle status` and `peagle cleanup`: what peagle created, and tearing it down (only that)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionsOpt, YesOpt, run


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("cleanup")(cleanup)


def status(
    name: Annotated[str | None, typer.Argument(help="One endpoint (default: every peagle endpoint).")] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C; off a terminal, print a line per change.")] = False,
    interval: Annotated[float | None, typer.Option("--interval", help="Seconds between refreshes with --watch (default 10).")] = None,
    region: RegionsOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """peagle-managed endpoints: status, model, mode, K, instances, age, expiry, cost so far."""

    def body(out):
        from ..errors import UsageError

        if interval is not None and not watch:
            raise UsageError("--interval only applies with --watch", "add --watch, or drop --interval")
        if interval is not None and not 0 < interval <= 86400:
            raise UsageError(f"--interval must be more than 0 and at most 86400 seconds, got {interval:g}",
                             "pass e.g. --interval 10")
        if watch and json_output:
            raise UsageError("--watch cannot be combined with --json (that prints one document)",
                             "poll 'peagle status --json' instead")
        from ..aws import AwsSession, resolve_region
        from ..lifecycle import report
        from ..lifecycle import status as list_status
        from ..lifecycle.region_search import nothing_line, search_regions, tagged_regions
        from ..lifecycle.regions import parse_regions
        from . import status_view

        listed = parse_regions(region, resolve_region(None))
        if watch:
            if len(listed) > 1:
                raise UsageError("--watch follows one region", "pass one --region with --watch")
            session = AwsSession(listed[0], profile)
            status_view.watch(out, lambda: list_status(session, name), interval=interval or 10.0)
            return
        # each listed region, then each a --region A,B deploy found there tried (lifecycle/region_search.py)
        searched = search_regions(listed, lambda there: report(AwsSession(there, profile), name),
                                  lambda found: tagged_regions(*found))
        rows = [row for _, (there, _) in searched for row in there]
        found = [lo for _, (_, there) in searched for lo in there]
        unused = [lo for lo in found if not lo.in_progress]
        building = [lo for lo in found if lo.in_progress]  # another peagle's work in progress: not unused
        if name and not rows and not found:
            raise UsageError(f"no endpoint named {name!r} in {', '.join(r for r, _ in searched)}",
                             "see peagle status")
        for row in rows:
            for warning in (row.vllm.warnings if row.vllm else []):
                out.warn(f"{row.name}: {warning}")
            for problem in row.tag_problems:
                out.warn(f"{row.name}: tag {problem}; shown as unknown")
            if row.label_mismatch:
                out.warn(f"{row.name}: {row.label_mismatch} (shown: the served config)")
        unknown = [r for r in rows if r.autoscaling is not None and r.autoscaling.state == "unknown"
                   and r.autoscaling.worth_saying]
        if unknown:  # a read failure, not an endpoint failure: the status itself is still right
            out.warn(f"could not read Application Auto Scaling ({unknown[0].autoscaling.detail}); "
                     "autoscaling shown as unknown")
        route = None
        component = rows[0].component.name if rows and rows[0].component is not None \
            and rows[0].component.status == "InService" else None
        if name is not None and rows and rows[0].status == "InService" and (rows[0].hosting == "endpoint"
                                                                             or component is not None):
            from ..runtime.openai_route import route_info

            route = route_info(AwsSession(rows[0].region, profile), rows[0].name, component)

        def human(console):
            if len(searched) == 1:
                status_view.render(console, rows, unused=unused, missing=name, in_progress=building)
            for there, (its_rows, its_found) in searched if len(searched) > 1 else []:
                if not its_rows and not its_found:
                    console.print(nothing_line(there, name), markup=False, soft_wrap=True, highlight=False)
                    continue
                status_view.render(console, its_rows, title=f"peagle endpoints in {there}", missing=name,
                                   unused=[lo for lo in its_found if not lo.in_progress],
                                   in_progress=[lo for lo in its_found if lo.in_progress])
            if route is not None:
                console.print(f"{rows[0].name}: OpenAI base URL {route['base_url']} (api key: {route['command']})",
                              markup=False, soft_wrap=True)

        out.result({"endpoints": rows, "unused": unused, "in_progress": building,
                    "regions_checked": [there for there, _ in searched],
                    **({"openai": route} if route else {})}, human)

    run(json_output, body)


def cleanup(
    name: Annotated[str | None, typer.Argument(help="The endpoint to remove with its config and model.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every peagle endpoint (and leftover configs/models).")] = False,
    expired: Annotated[bool, typer.Option(help="Every peagle endpoint whose --ttl has passed.")] = False,
    wait: Annotated[bool, typer.Option(help="Wait until the endpoint is deleted.")] = True,
    region: RegionsOpt = None,
    profile: ProfileOpt = None,
    yes: YesOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Delete endpoint, endpoint config and model that peagle created. Never touches anything else."""

    def body(out):
        from ..aws import AwsSession
        from ..errors import UsageError
        from ..lifecycle import cleanup as run_cleanup

        if sum((bool(name), all_, expired)) != 1:
            raise UsageError("cleanup needs exactly one of NAME, --all or --expired", "see peagle cleanup --help")
        if name:
            from ..inputs import validate_name

            validate_name(name)
        what = name or ("every peagle endpoint" if all_ else "every expired peagle endpoint")
        parts = "endpoint, endpoint config, model"
        if name and not yes and out.interactive_input():  # the question names all that goes: read it first
            from ..aws import resolve_region
            from ..lifecycle.regions import parse_regions

            parts = _what_goes(AwsSession(parse_regions(region, resolve_region(None))[0], profile), name) or parts
        out.confirm(f"Delete {what} ({parts})?", yes=yes)
        from ..aws import resolve_region
        from ..errors import Interrupted
        from ..lifecycle.region_search import followable, search_regions
        from ..lifecycle.regions import parse_regions
        from ..lifecycle.signals import Signalled, SignalGuard

        # SIGTERM/SIGHUP like Ctrl-C: exit 130. Each endpoint carries peagle:deleting before it is deleted, so
        # 'peagle recover' finishes what was started; nothing marked means nothing was deleted
        marked: list[str] = []
        listed = parse_regions(region, resolve_region(None))
        looked: list[str] = []  # each listed region, then each one a deploy removed there tried (region_search.py)

        def look(there):
            looked.append(there)
            if there not in listed:  # reached by a tag only: what is there is listed, never deleted unasked
                return None, None, _listing(AwsSession(there, profile), name)
            try:
                return run_cleanup(AwsSession(there, profile), name, all_=all_, expired=expired, wait=wait,
                                   on_marked=marked.append), None, None
            except UsageError as error:  # NAME: nothing of it here (or not peagle's): said once all are looked in
                if not name or len(listed) == 1:  # one region: as before the list existed
                    raise
                return None, error, None

        recover = f"peagle recover {name or '--all'} --region {','.join(listed)}"
        try:
            with SignalGuard(f"stopping: '{recover}' finishes what this cleanup started"):
                searched = search_regions(listed, look,
                                          lambda found: followable(found[0].regions_named) if found[0] else [])
        except Signalled as exc:
            recover = f"peagle recover {name or '--all'} --region {','.join(looked)}"
            untouched = "" if marked or not name else f"; no endpoint {name} was touched (run this cleanup again)"
            raise Interrupted(f"interrupted by {exc.name}", f"finish with '{recover}'{untouched}") from None
        except Exception as exc:
            from ..aws import translate_error

            error = translate_error(exc)
            if error is None:
                raise
            if marked:  # deletes had started: the recovery command finishes them
                error.hint = f"{error.hint + '; ' if error.hint else ''}finish with '{recover}'"
            elif name and "nothing was deleted" not in error.one_line():
                error.hint = f"{error.hint + '; ' if error.hint else ''}nothing was deleted"
            raise error from None
        report, said = _across_regions(out, name, searched)
        for skipped in report.skipped:
            out.warn(f"skipped {skipped.name}: {skipped.reason}")

        def human(console):
            if len(searched) == 1 and not report.outcomes:
                console.print("nothing to clean up")
            for there, found in said:
                if isinstance(found, str):  # a region with nothing of peagle's (NAME's), or what a tag led to
                    console.print(found, markup=False, soft_wrap=True, highlight=False)
                    continue
                for o in found:
                    style = {"deleted": "green", "already gone": "dim", "left": "yellow", "failed": "red"}[o.result]
                    reason = f" ({o.reason})" if o.reason else ""
                    where = f"{there}: " if len(searched) > 1 else ""
                    console.print(f"{where}[{style}]{o.result}[/{style}] {o.kind.replace('_', ' ')} {o.name}{reason}")

        out.result({"deleted": report.deleted, "left": report.left, "skipped": report.skipped,
                    "outcomes": report.outcomes, "ok": report.error is None,
                    "regions": [{"region": there, **({"said": found} if isinstance(found, str) else
                                                     {"outcomes": found})} for there, found in said]}, human)
        if report.error is not None:  # some deletes failed: the others were done and are listed above
            import typer as _typer

            report.error.hint = f"{report.error.hint + '; ' if report.error.hint else ''}finish with '{recover}'"
            out.error(report.error.one_line())
            raise _typer.Exit(int(report.error.exit_code))

    run(json_output, body)


def _listing(session, name):
    """What of peagle's (of NAME's) is in a region that cleanup reached only by a deploy's peagle:regions-tried tag:
    one line, with the command that removes it, or the line that nothing is there."""
    from ..lifecycle import report
    from ..lifecycle.region_search import nothing_line

    rows, leftovers = report(session, name)
    where = session.region
    found = [f"endpoint {row.name} ({row.status})" for row in rows]
    found += [f"unused {lo.label} {lo.name}" for lo in leftovers]
    if not found:
        return nothing_line(where, name)
    remove = f"peagle cleanup {name} --region {where} --yes" if name else f"peagle cleanup --all --region {where} --yes"
    return f"checked {where}: peagle's {', '.join(found)} (a deploy found here tried it; not deleted: remove with " \
           f"'{remove}')"


def _what_goes(session, name: str) -> str | None:
    """What `cleanup NAME` deletes besides the endpoint, its config and model, read before the question: each
    inference component it hosts, with its scalable target, scaling policies and their alarms. None when nothing
    could be read (the question then names the endpoint, config and model; the cleanup itself says what it did)."""
    from ..aws import translate_error
    from ..lifecycle.components import list_components

    try:
        components = [c["InferenceComponentName"] for c in list_components(session.client("sagemaker"), name)]
        aas = session.client("application-autoscaling")
        parts = ["endpoint, endpoint config, model"]
        for component in components:
            resource = f"inference-component/{component}"
            targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource])
            policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource)
            alarms = {a["AlarmName"] for p in policies.get("ScalingPolicies", []) for a in p.get("Alarms", [])}
            count = len(policies.get("ScalingPolicies", []))
            scaling = (f" with its scalable target, {count} scaling polic{'ies' if count != 1 else 'y'} and "
                       f"{len(alarms)} alarm{'s' if len(alarms) != 1 else ''}") if targets.get("ScalableTargets") else ""
            parts.append(f"inference component {component}{scaling}")
    except Exception as exc:  # noqa: BLE001 - a read for the question only: the cleanup reads again and says
        if translate_error(exc) is None:
            raise
        return None
    return ", ".join(parts)


def _across_regions(out, name, searched):
    """One cleanup report of every region searched, and per region what to say: its outcomes, the line that
    nothing of peagle's is there, or (a region a tag led to) what is there. NAME found in no region is the
    one-region error, naming every region."""
    from ..errors import UsageError
    from ..lifecycle.region_search import nothing_line
    from ..lifecycle.teardown import CleanupReport

    errors = [error for _, (report, error, _) in searched if error is not None]
    if len(errors) == len(searched):  # nothing named NAME anywhere (or not peagle's)
        nothing = [e for e in errors if e.message.startswith("no endpoint, endpoint config or model named")]
        if len(nothing) < len(errors):
            raise next(e for e in errors if e not in nothing)
        regions = ", ".join(there for there, _ in searched)
        raise UsageError(f"no endpoint, endpoint config or model named {name!r} in {regions}", nothing[0].hint)
    total = CleanupReport()
    said = []
    for there, (report, error, listing) in searched:
        if listing is not None:
            said.append((there, listing))
            continue
        if report is None:
            if not error.message.startswith("no endpoint, endpoint config or model named"):
                out.warn(f"{there}: {error.one_line()}")
            said.append((there, nothing_line(there, name)))
            continue
        total.outcomes += report.outcomes
        total.skipped += report.skipped
        total.error = total.error or report.error
        said.append((there, report.outcomes if report.outcomes or len(searched) == 1 else nothing_line(there, name)))
    return total, said
