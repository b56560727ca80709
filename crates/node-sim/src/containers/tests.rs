use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus};

use super::*;

fn plan(name: &str, b: Behaviour) -> ContainerPlan {
    ContainerPlan::new(name, "img", b)
}

fn exit(ms: u64, code: i32) -> Behaviour {
    Behaviour::Exit {
        after: Duration::from_millis(ms),
        code,
    }
}

fn rt(init: Vec<ContainerPlan>, main: Vec<ContainerPlan>, p: RestartPolicy) -> PodRuntime {
    PodRuntime::new(
        "uid",
        "p_ns(uid)",
        init,
        main,
        p,
        Duration::from_millis(10),
        Duration::from_millis(40),
    )
}

fn terminated(state: Option<&ContainerState>) -> &ContainerStateTerminated {
    state
        .and_then(|s| s.terminated.as_ref())
        .expect("a terminated state")
}

/// Steps simulated time to each due moment until `until`.
fn run_until(r: &mut PodRuntime, start: Instant, until: Duration) -> Vec<Change> {
    let mut all = Vec::new();
    while let Some(t) = r.next_due() {
        if t > start + until {
            break;
        }
        all.extend(r.advance(t));
    }
    all
}

#[test]
fn runs_forever_by_default() {
    let now = Instant::now();
    let mut r = rt(
        vec![],
        vec![plan("c", Behaviour::RunForever)],
        RestartPolicy::Never,
    );
    let ch = r.start(now);
    assert_eq!(ch.len(), 1);
    assert_eq!(r.phase(), "Running");
    assert!(r.unready().is_empty());
    assert_eq!(r.next_due(), None);
}

#[test]
fn never_policy_succeeds_or_fails() {
    let now = Instant::now();
    let mut r = rt(
        vec![],
        vec![plan("a", exit(5, 0)), plan("b", exit(10, 3))],
        RestartPolicy::Never,
    );
    r.start(now);
    run_until(&mut r, now, Duration::from_secs(1));
    assert_eq!(r.finished(), Some(false));
    assert_eq!(r.phase(), "Failed");
    let (_, st) = r.statuses();
    let t = terminated(st[1].state.as_ref());
    assert_eq!(t.exit_code, 3);
    assert_eq!(t.reason.as_deref(), Some("Error"));

    let mut r = rt(vec![], vec![plan("a", exit(0, 0))], RestartPolicy::Never);
    r.start(now);
    assert_eq!(r.finished(), Some(true));
}

#[test]
fn always_policy_restarts_with_growing_delay() {
    let now = Instant::now();
    let mut r = rt(vec![], vec![plan("c", exit(1, 1))], RestartPolicy::Always);
    r.start(now);
    let changes = run_until(&mut r, now, Duration::from_millis(200));
    let starts = changes
        .iter()
        .filter(|c| matches!(c, Change::Started { .. }))
        .count();
    assert!(starts >= 3, "{changes:?}");
    assert_eq!(r.finished(), None);
    assert_eq!(r.phase(), "Running");
    let (_, st) = r.statuses();
    assert!(st[0].restart_count >= 3);
    assert_eq!(terminated(st[0].last_state.as_ref()).exit_code, 1);
    // Delays: 10, 20, 40, 40 ms: in 200 ms about five restarts, not 100.
    assert!(st[0].restart_count < 10);
}

#[test]
fn on_failure_restarts_until_success() {
    let now = Instant::now();
    let mut r = rt(
        vec![],
        vec![plan("c", exit(1, 0))],
        RestartPolicy::OnFailure,
    );
    r.start(now);
    run_until(&mut r, now, Duration::from_secs(1));
    assert_eq!(r.finished(), Some(true));

    let mut r = rt(
        vec![],
        vec![plan("c", exit(1, 2))],
        RestartPolicy::OnFailure,
    );
    r.start(now);
    run_until(&mut r, now, Duration::from_millis(100));
    assert_eq!(r.finished(), None);
}

#[test]
fn init_containers_run_in_order_before_regular_ones() {
    let now = Instant::now();
    let mut sidecar = plan("side", Behaviour::RunForever);
    sidecar.sidecar = true;
    let mut r = rt(
        vec![plan("i1", exit(5, 0)), sidecar, plan("i2", exit(5, 0))],
        vec![plan("main", exit(5, 0))],
        RestartPolicy::Never,
    );
    let first = r.start(now);
    assert_eq!(
        first,
        vec![Change::Started {
            container: "i1".into(),
            restart_count: 0
        }]
    );
    assert_eq!(r.phase(), "Pending");
    assert!(!r.initialized());
    let rest = run_until(&mut r, now, Duration::from_secs(1));
    let order: Vec<String> = rest
        .iter()
        .map(|c| match c {
            Change::Started { container, .. } => format!("+{container}"),
            Change::Exited { container, .. } => format!("-{container}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        order,
        ["-i1", "+side", "+i2", "-i2", "+main", "-main", "-side"]
    );
    assert_eq!(r.finished(), Some(true));
}

#[test]
fn failing_init_container() {
    let now = Instant::now();
    let mut r = rt(
        vec![plan("i", exit(0, 1))],
        vec![plan("m", Behaviour::RunForever)],
        RestartPolicy::Never,
    );
    r.start(now);
    assert_eq!(r.finished(), Some(false));

    let mut r = rt(
        vec![plan("i", exit(0, 1))],
        vec![plan("m", Behaviour::RunForever)],
        RestartPolicy::Always,
    );
    r.start(now);
    run_until(&mut r, now, Duration::from_millis(100));
    assert_eq!(r.phase(), "Pending");
    let (init, main) = r.statuses();
    assert!(init[0].restart_count >= 2);
    assert!(main[0].state.as_ref().unwrap().waiting.is_some());
}

fn waiting(s: &ContainerStatus) -> (String, String) {
    let w = s.state.as_ref().unwrap().waiting.as_ref().unwrap();
    (
        w.reason.clone().unwrap_or_default(),
        w.message.clone().unwrap_or_default(),
    )
}

#[test]
fn first_restart_at_once_then_crash_loop_back_off() {
    let now = Instant::now();
    let mut r = rt(vec![], vec![plan("c", exit(5, 1))], RestartPolicy::Always);
    r.start(now);
    // First exit: restarted in the same step, no back-off.
    let ch = r.advance(now + Duration::from_millis(5));
    assert_eq!(
        ch,
        vec![
            Change::Exited {
                container: "c".into(),
                exit_code: 1
            },
            Change::Started {
                container: "c".into(),
                restart_count: 1
            },
        ]
    );
    // Second exit: waits, and says why.
    let ch = r.advance(now + Duration::from_millis(10));
    assert!(ch.contains(&Change::BackOff {
        container: "c".into(),
        delay: Duration::from_millis(10)
    }));
    let (_, st) = r.statuses();
    assert_eq!(
        waiting(&st[0]),
        (
            "CrashLoopBackOff".into(),
            "back-off 10ms restarting failed container=c pod=p_ns(uid)".into()
        )
    );
    assert_eq!(st[0].restart_count, 1);
    assert_eq!(st[0].container_id.as_deref(), Some("sim://uid-c-1"));
    assert!(st[0].user.is_some());
    assert_eq!(r.phase(), "Running");
    assert_eq!(r.unready(), vec!["c".to_string()]);
}

#[test]
fn an_ended_container_restarts_at_once_from_a_new_plan() {
    let now = Instant::now();
    let mut r = rt(
        vec![],
        vec![plan("c", Behaviour::RunForever)],
        RestartPolicy::Always,
    );
    r.start(now);
    let ch = r.end("c", now).expect("ends");
    assert!(matches!(&ch[..], [Change::Exited { container, exit_code: 0 }] if container == "c"));
    // Due at once; created again only after a replan, as the worker
    // does, so a CDI device gone meanwhile is seen.
    assert_eq!(r.creations_due(now), vec!["c".to_string()]);
    let mut gone = plan("c", Behaviour::RunForever);
    gone.create_error = Some(CreateError {
        message: "unresolvable CDI devices x/y=z".into(),
        detail: "unresolvable CDI devices x/y=z: not in /cdi".into(),
    });
    r.replan(gone);
    let ch = r.advance(now);
    assert!(matches!(&ch[..], [Change::CreateFailed { container, .. }] if container == "c"));
    assert_eq!(r.unready(), vec!["c".to_string()]);
    // Only a running regular container can be ended.
    assert!(r.end("c", now).unwrap_err().contains("is not running"));
    assert!(
        r.end("x", now)
            .unwrap_err()
            .contains("no regular container x")
    );

    // Under Never the pod ends.
    let mut r = rt(
        vec![],
        vec![plan("c", Behaviour::RunForever)],
        RestartPolicy::Never,
    );
    r.start(now);
    r.end("c", now).expect("ends");
    assert_eq!(r.finished(), Some(true));
}

#[test]
fn a_container_the_runtime_cannot_create_waits_and_is_retried() {
    let now = Instant::now();
    let mut broken = plan("b", Behaviour::RunForever);
    broken.create_error = Some(CreateError {
        message: "unresolvable CDI devices x/y=z".into(),
        detail: "unresolvable CDI devices x/y=z: not in /cdi".into(),
    });
    let mut r = rt(
        vec![],
        vec![plan("a", Behaviour::RunForever), broken],
        RestartPolicy::Never,
    );
    let ch = r.start(now);
    assert!(matches!(&ch[1], Change::CreateFailed { container, error }
        if container == "b" && error.message == "unresolvable CDI devices x/y=z"));
    // One container never ran: the pod is still pending.
    assert_eq!(r.phase(), "Pending");
    assert!(!r.unready().is_empty());
    let (_, st) = r.statuses();
    assert_eq!(
        waiting(&st[1]),
        (
            "CreateContainerError".into(),
            "unresolvable CDI devices x/y=z".into()
        )
    );
    assert_eq!(st[1].container_id, None);
    assert_eq!(st[1].user, None);
    assert_eq!(st[1].restart_count, 0);

    // Retried with a fresh plan once due; the runtime resolves again.
    let due = r.next_due().unwrap();
    assert_eq!(r.creations_due(due), vec!["b".to_string()]);
    r.replan(plan("b", Behaviour::RunForever));
    let ch = r.advance(due);
    assert_eq!(
        ch,
        vec![Change::Started {
            container: "b".into(),
            restart_count: 0
        }]
    );
    assert_eq!(r.phase(), "Running");
    assert!(r.unready().is_empty());
}

#[test]
fn completed_init_containers_are_ready_and_initialize_the_pod() {
    let now = Instant::now();
    let mut r = rt(
        vec![plan("i", exit(0, 0))],
        vec![plan("m", Behaviour::RunForever)],
        RestartPolicy::Never,
    );
    r.start(now);
    let (init, main) = r.statuses();
    assert!(init[0].ready);
    assert!(main[0].ready);
    assert!(r.initialized());
    assert!(r.init_incomplete().is_empty());

    // A failed init container leaves the pod uninitialized.
    let mut r = rt(
        vec![plan("i", exit(0, 2))],
        vec![plan("m", Behaviour::RunForever)],
        RestartPolicy::Never,
    );
    r.start(now);
    assert_eq!(r.finished(), Some(false));
    assert!(!r.initialized());
    assert_eq!(r.init_incomplete(), vec!["i".to_string()]);
    let (init, main) = r.statuses();
    assert!(!init[0].ready);
    assert_eq!(waiting(&main[0]).0, "PodInitializing");
}

#[test]
fn go_durations() {
    assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
    assert_eq!(go_duration(Duration::from_secs(10)), "10s");
    assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
    assert_eq!(go_duration(Duration::from_secs(80)), "1m20s");
}
