"""Many assessments, or many traces' list previews, in one transaction.

MLflow's public call (``log_assessment``) writes one assessment per transaction; on a SQLite store each commit
syncs the disk (5 to 20 ms on the machines kbench runs on), so a run's hundred expectations cost a second or
more, about as long as the run's own search. On MLflow's SQL store this writes them as ``create_assessment``
does (the same rows, its rollup invalidation), all in one transaction; any other store (a tracking server)
gets the public call per assessment. tests/tracking/test_mlflow_native.py reads them back through the public
API, so an MLflow upgrade that changes these tables fails there, not in a user's run.
"""
from __future__ import annotations


def log_assessments(tracing_client, assessments: list) -> int:
    """Attach ``assessments`` (each with its ``trace_id``) to their traces; how many were written."""
    if not assessments:
        return 0
    store = tracing_client.store
    try:
        from mlflow.store.tracking.dbmodels.models import SqlAssessments, SqlTraceInfo
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
        from mlflow.store.tracking.utils.sql_trace_rollups import RollupFamily, enqueue_rollup_rebuilds
    except ImportError:  # an MLflow without these internals: the public call
        SqlAlchemyStore = None
    if SqlAlchemyStore is None or not isinstance(store, SqlAlchemyStore):
        for assessment in assessments:
            tracing_client.log_assessment(assessment.trace_id, assessment)
        return len(assessments)
    trace_ids = sorted({a.trace_id for a in assessments})
    with store.ManagedSessionMaker(read_only=False) as session:
        infos = {t.request_id: t for t in session.query(SqlTraceInfo).filter(SqlTraceInfo.request_id.in_(trace_ids))}
        missing = [t for t in trace_ids if t not in infos]
        if missing:
            raise ValueError(f"{len(missing)} traces are not in the store (e.g. {missing[0]}); log their spans first")
        for info in infos.values():
            enqueue_rollup_rebuilds(session, RollupFamily.ASSESSMENT, int(info.experiment_id), [info.timestamp_ms])
        for assessment in assessments:
            info = infos[assessment.trace_id]
            row = SqlAssessments.from_mlflow_entity(assessment)
            row.experiment_id = info.experiment_id
            row.trace_timestamp_ms = info.timestamp_ms
            session.add(row)
    return len(assessments)


def set_request_previews(tracing_client, previews: dict[str, str]) -> None:
    """Set what MLflow's Traces list shows in its Input column for each trace (trace id -> text), after its spans
    were logged. The store fills that preview from the root span's inputs, which MLflow's judges also read, so the
    run's name goes here instead of into the inputs. On MLflow's SQL store: one transaction; elsewhere, the
    public upsert (``start_trace`` with the stored info) per trace."""
    if not previews:
        return
    store = tracing_client.store
    try:
        from mlflow.store.tracking.dbmodels.models import SqlTraceInfo
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:
        SqlAlchemyStore = None
    if SqlAlchemyStore is None or not isinstance(store, SqlAlchemyStore):
        for trace_id, text in previews.items():
            info = tracing_client.get_trace_info(trace_id)
            info.request_preview = text
            tracing_client.start_trace(info)
        return
    with store.ManagedSessionMaker(read_only=False) as session:
        rows = session.query(SqlTraceInfo).filter(SqlTraceInfo.request_id.in_(sorted(previews)))
        for row in rows:
            row.request_preview = previews[row.request_id]
