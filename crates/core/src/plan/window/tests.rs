use super::*;
use crate::spec::{Cluster, HumanDuration, Maintenance};

fn window(schedule: &str, hours: u64) -> MaintenanceWindow {
    MaintenanceWindow {
        schedule: schedule.parse().expect("cron"),
        duration: HumanDuration::minutes(hours * 60),
    }
}

/// A cluster whose maintenance is `allow` and `deny`, read in `zone`.
fn spec(zone: &str, allow: &[(&str, u64)], deny: &[(&str, u64)]) -> ClusterSpec {
    let mut spec = Cluster::test("prod").spec;
    spec.maintenance = Maintenance {
        time_zone: zone.parse().expect("zone"),
        allow: allow.iter().map(|(s, h)| window(s, *h)).collect(),
        deny: deny.iter().map(|(s, h)| window(s, *h)).collect(),
    };
    spec
}

fn at(text: &str) -> Timestamp {
    text.parse().expect("time")
}

fn opens_at(text: &str, deny: Option<&str>, zone: Option<&str>) -> WindowState {
    WindowState::Closed(Hold {
        opens: Some(at(text)),
        deny: deny.map(SmolStr::new),
        time_zone: zone.map(SmolStr::new),
        fit: None,
    })
}

#[test]
fn a_window_is_open_from_its_start_for_its_duration() {
    let mut spec = Cluster::test("prod").spec;
    spec.rollout.maintenance_window = Some(window("0 0 1 * * Sat", 4));
    // 2026-05-02 is a Saturday.
    assert_eq!(state(&spec, at("2026-05-02T01:00:00Z")), WindowState::Open);
    assert_eq!(state(&spec, at("2026-05-02T04:59:59Z")), WindowState::Open);
    assert_eq!(
        state(&spec, at("2026-05-02T05:00:00Z")),
        opens_at("2026-05-09T01:00:00Z", None, None)
    );
    assert_eq!(
        state(&spec, at("2026-04-29T12:00:00Z")),
        opens_at("2026-05-02T01:00:00Z", None, None)
    );
}

#[test]
fn without_a_window_everything_may_run() {
    let spec = Cluster::test("prod").spec;
    assert_eq!(state(&spec, at("2026-04-29T12:00:00Z")), WindowState::Open);
}

#[test]
fn schedules_follow_the_zone_across_a_change_to_summer_time() {
    // Saturdays 01:00 in Rome: UTC+1 until Sunday 2026-03-29, UTC+2 after.
    let spec = spec("Europe/Rome", &[("0 0 1 * * Sat", 4)], &[]);
    assert_eq!(
        state(&spec, at("2026-03-18T12:00:00Z")),
        opens_at("2026-03-21T00:00:00Z", None, Some("Europe/Rome"))
    );
    assert_eq!(
        state(&spec, at("2026-03-30T12:00:00Z")),
        opens_at("2026-04-03T23:00:00Z", None, Some("Europe/Rome"))
    );
    assert_eq!(state(&spec, at("2026-04-04T02:59:59Z")), WindowState::Open);
}

#[test]
fn a_time_the_clocks_skip_fires_when_they_resume_and_a_repeated_one_fires_once() {
    // Daily 02:30 in Rome for 10 minutes. On 2026-03-29 the clocks go 02:00 → 03:00: it fires
    // at 03:30 local (01:30 UTC), whether asked before the jump or just after it.
    let spec = spec("Europe/Rome", &[("0 30 2 * * *", 0)], &[]);
    let mut spec = spec;
    spec.maintenance.allow[0].duration = HumanDuration::minutes(10);
    let zone = Some("Europe/Rome");
    assert_eq!(
        state(&spec, at("2026-03-29T00:45:00Z")),
        opens_at("2026-03-29T01:30:00Z", None, zone)
    );
    assert_eq!(
        state(&spec, at("2026-03-29T01:10:00Z")),
        opens_at("2026-03-29T01:30:00Z", None, zone)
    );
    // On 2026-10-25 the clocks go 03:00 → 02:00: 02:30 comes twice, the window opens once
    // (02:30 summer time, 00:30 UTC); during the second 02:30 it is closed.
    assert_eq!(state(&spec, at("2026-10-25T00:35:00Z")), WindowState::Open);
    assert_eq!(
        state(&spec, at("2026-10-25T01:35:00Z")),
        opens_at("2026-10-26T01:30:00Z", None, zone)
    );
}

#[test]
fn a_deny_window_holds_whatever_the_allow_windows_say_and_names_itself() {
    // A freeze from 20 December for two weeks, in Rome; allow windows every day.
    let spec = spec(
        "Europe/Rome",
        &[("0 0 0 * * *", 24)],
        &[("0 0 20 12 *", 336)],
    );
    assert_eq!(state(&spec, at("2026-12-19T22:59:59Z")), WindowState::Open);
    // 20 December 00:00 in Rome is 19 December 23:00 UTC; it ends 3 January 00:00 in Rome.
    assert_eq!(
        state(&spec, at("2026-12-24T10:00:00Z")),
        opens_at(
            "2027-01-02T23:00:00Z",
            Some("0 0 20 12 *"),
            Some("Europe/Rome")
        )
    );
    assert_eq!(state(&spec, at("2027-01-02T23:00:00Z")), WindowState::Open);
}

#[test]
fn after_a_deny_window_the_next_allow_window_is_when_steps_start() {
    // Saturdays 01:00 for 4 h; the freeze ends Sunday 2027-01-03, so the next Saturday.
    let spec = spec(
        "Europe/Rome",
        &[("0 0 1 * * Sat", 4)],
        &[("0 0 20 12 *", 336)],
    );
    assert_eq!(
        state(&spec, at("2026-12-24T10:00:00Z")),
        opens_at(
            "2027-01-09T00:00:00Z",
            Some("0 0 20 12 *"),
            Some("Europe/Rome")
        )
    );
    // An allow window inside the freeze is closed too, and outside the freeze but before the
    // next allow window it is the allow window that holds.
    assert_eq!(
        state(&spec, at("2026-12-26T01:30:00Z")),
        opens_at(
            "2027-01-09T00:00:00Z",
            Some("0 0 20 12 *"),
            Some("Europe/Rome")
        )
    );
    assert_eq!(
        state(&spec, at("2027-01-05T12:00:00Z")),
        opens_at("2027-01-09T00:00:00Z", None, Some("Europe/Rome"))
    );
}

#[test]
fn deny_windows_that_follow_each_other_hold_until_the_last_ends() {
    // Two freezes in UTC: 1–3 June and 3–5 June.
    let spec = spec("UTC", &[], &[("0 0 1 6 *", 48), ("0 0 3 6 *", 48)]);
    assert_eq!(
        state(&spec, at("2026-06-01T12:00:00Z")),
        opens_at("2026-06-05T00:00:00Z", Some("0 0 1 6 *"), None)
    );
}

#[test]
fn a_deny_window_as_long_as_its_period_never_opens() {
    let spec = spec("UTC", &[], &[("0 * * * *", 2)]);
    assert_eq!(
        state(&spec, at("2026-06-01T12:00:00Z")),
        WindowState::Closed(Hold {
            opens: None,
            deny: Some(SmolStr::new("0 * * * *")),
            time_zone: None,
            fit: None,
        })
    );
}

/// A window of `minutes` opening at each fire of `schedule`.
fn short_window(schedule: &str, minutes: u64) -> MaintenanceWindow {
    MaintenanceWindow {
        schedule: schedule.parse().expect("cron"),
        duration: HumanDuration::minutes(minutes),
    }
}

/// A step measured at `minutes` (the 90th percentile of five runs).
fn needs(minutes: u64) -> Option<Need> {
    Some(Need {
        duration: Duration::from_secs(minutes * 60),
        samples: 5,
    })
}

fn held(
    opens: Option<&str>,
    deny: Option<&str>,
    fit: Option<(Option<Need>, Shortfall)>,
) -> WindowState {
    WindowState::Closed(Hold {
        opens: opens.map(at),
        deny: deny.map(SmolStr::new),
        time_zone: None,
        fit: fit.map(|(need, short)| (need.expect("a need"), short)),
    })
}

#[test]
fn a_measured_step_starts_only_if_it_fits_in_what_is_left_of_the_window() {
    // Saturdays 01:00 for 4 h; 2026-05-02 is a Saturday.
    let spec = spec("UTC", &[("0 0 1 * * Sat", 4)], &[]);
    assert_eq!(
        state_for(
            &spec,
            at("2026-05-02T04:57:00Z"),
            needs(3),
            &Search::new(None)
        ),
        WindowState::Open,
        "3m left, 3m needed"
    );
    assert_eq!(
        state_for(
            &spec,
            at("2026-05-02T04:58:00Z"),
            needs(3),
            &Search::new(None)
        ),
        held(
            Some("2026-05-09T01:00:00Z"),
            None,
            Some((needs(3), Shortfall::WindowLeft { left_seconds: 120 }))
        )
    );
    // Never measured: held by nothing but the window being closed.
    assert_eq!(
        state_for(&spec, at("2026-05-02T04:58:00Z"), None, &Search::new(None)),
        WindowState::Open
    );
    // Outside the window, it waits for the next one as any step does.
    assert_eq!(
        state_for(
            &spec,
            at("2026-05-05T12:00:00Z"),
            needs(3),
            &Search::new(None)
        ),
        opens_at("2026-05-09T01:00:00Z", None, None)
    );
}

#[test]
fn a_step_too_long_for_one_window_waits_for_the_next_one_it_fits_in() {
    // Saturdays 01:00 for 2 minutes, Sundays 01:00 for 4 hours.
    let mut spec = Cluster::test("prod").spec;
    spec.maintenance.allow = vec![
        short_window("0 0 1 * * Sat", 2),
        short_window("0 0 1 * * Sun", 240),
    ];
    let state = state_for(
        &spec,
        at("2026-05-02T01:00:00Z"),
        needs(3),
        &Search::new(None),
    );
    assert_eq!(
        state,
        held(
            Some("2026-05-03T01:00:00Z"),
            None,
            Some((needs(3), Shortfall::WindowLeft { left_seconds: 120 }))
        )
    );
    let WindowState::Closed(hold) = state else {
        unreachable!("held")
    };
    assert_eq!(
        hold.resource("drain of prod-w-2").to_string(),
        "maintenance window: drain of prod-w-2 needs 3m (p90 of 5 run(s)); 2m of the window left: waits until Sun 2026-05-03 01:00 UTC"
    );
}

#[test]
fn a_step_longer_than_every_window_is_held_and_told_to_lengthen_one() {
    let mut spec = Cluster::test("prod").spec;
    spec.maintenance.allow = vec![short_window("0 0 1 * * Sat", 2)];
    let state = state_for(
        &spec,
        at("2026-05-02T01:00:00Z"),
        needs(3),
        &Search::new(None),
    );
    assert_eq!(
        state,
        held(
            None,
            None,
            Some((
                needs(3),
                Shortfall::NoWindowLongEnough {
                    longest_seconds: 120
                }
            ))
        )
    );
    let WindowState::Closed(hold) = state else {
        unreachable!("held")
    };
    assert!(
        hold.resource("drain").to_string().contains("lengthen one"),
        "{:?}",
        hold.resource("drain").to_string()
    );
}

#[test]
fn a_measured_step_does_not_run_into_a_deny_window() {
    // No allow window; a freeze from 20 December 00:00 UTC for two weeks.
    let spec = spec("UTC", &[], &[("0 0 20 12 *", 336)]);
    assert_eq!(
        state_for(
            &spec,
            at("2026-12-19T23:00:00Z"),
            needs(30),
            &Search::new(None)
        ),
        WindowState::Open
    );
    assert_eq!(
        state_for(
            &spec,
            at("2026-12-19T23:40:00Z"),
            needs(30),
            &Search::new(None)
        ),
        held(
            Some("2027-01-03T00:00:00Z"),
            None,
            Some((
                needs(30),
                Shortfall::DenyAhead {
                    schedule: "0 0 20 12 *".to_owned(),
                    starts: at("2026-12-20T00:00:00Z"),
                }
            ))
        )
    );
}

/// The first fire after `after` as capstan found it before fire times were counted: the
/// clocks' readings walked one by one from a jump's length before `after` (correct, and as
/// slow as the schedule is frequent). The reference the stepping search must agree with.
fn walked_next_fire(
    schedule: &CronSchedule,
    zone: &TimeZone,
    after: Timestamp,
) -> Option<Timestamp> {
    // Cron walks wall-clock times; in chrono's UTC they have no transitions, so each is placed
    // in the zone afterwards. The walk starts at the earlier of the wall-clock readings of
    // `after` now and before a recent jump forward: a skipped time just before the jump
    // fires after it.
    let before_a_jump = after.checked_sub(LONGEST_SHIFT).unwrap_or(after);
    let start = zone
        .to_datetime(after)
        .min(zone.to_offset(before_a_jump).to_datetime(after));
    let mut best: Option<Timestamp> = None;
    let mut scan_until: Option<civil::DateTime> = None;
    for fire in schedule
        .schedule()
        .after(&to_chrono(start)?)
        .take(1_000_000)
    {
        let wall = from_chrono(fire)?;
        if scan_until.is_some_and(|until| wall > until) {
            break;
        }
        let ambiguous = zone.to_ambiguous_timestamp(wall);
        let skipped = matches!(ambiguous.offset(), AmbiguousOffset::Gap { .. });
        // Compatible: a skipped time moves forward by the jump, a repeated one is the first.
        let Ok(at) = ambiguous.compatible() else {
            continue;
        };
        if at <= after {
            continue;
        }
        best = Some(best.map_or(at, |best| best.min(at)));
        if !skipped {
            // Later wall-clock times fall later, except skipped ones already counted.
            break;
        }
        // A skipped time lands after the jump, later than wall-clock times just after it:
        // look on for one of those.
        scan_until.get_or_insert(wall.checked_add(LONGEST_SHIFT).unwrap_or(wall));
    }
    best
}

/// The longest a zone's clocks jump, for [`walked_next_fire`].
const LONGEST_SHIFT: SignedDuration = SignedDuration::from_hours(3);

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// Around the clock changes of zones that jump by an hour, by half an hour and at
    /// midnight, stepping over skipped stretches finds the fire walking finds.
    #[test]
    fn the_next_fire_is_the_one_walking_the_clocks_finds(
        zone in proptest::sample::select(&["Europe/Rome", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "UTC"][..]),
        schedule in proptest::sample::select(&["0 30 2 * * *", "0 */15 * * * *", "0 0 * * * *", "0 45 1 * * Sun", "0 0 0 * * *", "0 59 * * * *", "0 30 1-3 * * *"][..]),
        transition in 0usize..8,
        offset in -14_400i64..14_400,
    ) {
        let zone_name: crate::spec::TimeZoneName = zone.parse().expect("zone");
        let zone = zone_name.zone();
        let schedule: CronSchedule = schedule.parse().expect("cron");
        // Asked within four hours of one of the zone's next clock changes (UTC has none:
        // anywhere in the first days of 2026).
        let start = at("2026-01-01T00:00:00Z");
        let near = zone
            .following(start)
            .nth(transition)
            .map_or(start, |change| change.timestamp());
        let after = near.checked_add(SignedDuration::from_secs(offset)).expect("time");
        proptest::prop_assert_eq!(
            next_fire(&schedule, zone, after, &Search::new(None)),
            walked_next_fire(&schedule, zone, after)
        );
    }
}

#[test]
fn just_after_a_jump_forward_a_skipped_time_fires_as_walking_finds_it() {
    // Rome on 2026-03-29: 02:00 → 03:00 at 01:00 UTC. Every quarter of an hour, asked every
    // minute of the three hours around the jump.
    let zone: crate::spec::TimeZoneName = "Europe/Rome".parse().expect("zone");
    let schedule: CronSchedule = "0 */15 * * * *".parse().expect("cron");
    for minute in 0..180 {
        let after = at("2026-03-29T00:00:00Z")
            .checked_add(SignedDuration::from_mins(minute))
            .expect("time");
        assert_eq!(
            next_fire(&schedule, zone.zone(), after, &Search::new(None)),
            walked_next_fire(&schedule, zone.zone(), after),
            "asked at {after}"
        );
    }
}

#[test]
fn a_search_near_a_spring_forward_costs_a_few_fire_times_per_schedule() {
    // The repository of issue 34: 32 allow and 32 deny windows firing every minute (the most
    // often validation lets them), planned just after Rome's clocks jump. Walking the skipped
    // hour fire time by fire time cost minutes; stepping over it costs the hops.
    let every_minute: Vec<(&str, u64)> = (0..32).map(|_| ("0 * * * * *", 1)).collect();
    let mut spec = spec("Europe/Rome", &every_minute, &[]);
    spec.maintenance.deny = (0..32).map(|_| short_window("0 * * * * *", 1)).collect();
    let search = Search::new(None);
    let state = state_for(&spec, at("2026-03-29T01:30:00Z"), needs(10), &search);
    assert!(
        matches!(state, WindowState::Closed(Hold { opens: None, .. })),
        "{state:?}"
    );
    let spent = FIRES_PER_SEARCH - search.fires_left.get();
    // MAX_HOPS hops over 64 deny windows, a couple of fire times each.
    assert!(spent <= MAX_HOPS * 64 * 3, "{spent} fire times");
}

#[test]
fn a_raised_stop_ends_the_search_closed() {
    let spec = spec("Europe/Rome", &[("0 0 1 * * Sat", 4)], &[]);
    let stop = AtomicBool::new(true);
    let search = Search::new(Some(&stop));
    assert_eq!(
        state_for(&spec, at("2026-04-29T12:00:00Z"), None, &search),
        WindowState::Closed(Hold {
            opens: None,
            deny: None,
            time_zone: Some(SmolStr::new("Europe/Rome")),
            fit: None,
        })
    );
    // The same search, not stopped, finds the window.
    assert_eq!(
        state(&spec, at("2026-04-29T12:00:00Z")),
        opens_at("2026-05-01T23:00:00Z", None, Some("Europe/Rome"))
    );
}

#[test]
fn a_spent_search_fails_closed_even_inside_an_open_window() {
    let spec = spec("UTC", &[("0 0 1 * * Sat", 4)], &[]);
    let search = Search::new(None);
    search.fires_left.set(0);
    assert!(matches!(
        state_for(&spec, at("2026-05-02T01:00:00Z"), None, &search),
        WindowState::Closed(Hold { opens: None, .. })
    ));
}
