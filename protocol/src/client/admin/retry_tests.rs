//! A metadata change that meets a cluster without an active controller (NOT_CONTROLLER per
//! topic) is resent until one answers or the operation's bound runs out.

use super::{AdminConfig, AdminCore, AdminOp, AdminOutcome, NewTopic};
use crate::client::net::ClientCore;
use crate::client::test_util::{next_request, respond};
use crate::wire::{CreatableTopicResultT, CreateTopicsResponseT, RequestBodyT, ResponseBodyT};
use crate::ErrorCode;

fn created(code: ErrorCode) -> ResponseBodyT {
    let mut t = CreatableTopicResultT::default();
    t.name = "t".into();
    t.error_code = code.into();
    let mut r = CreateTopicsResponseT::default();
    r.topics = Some(vec![t]);
    ResponseBodyT::CreateTopicsResponse(Box::new(r))
}

fn create(core: &mut AdminCore) {
    core.submit(
        AdminOp::CreateTopics {
            topics: vec![NewTopic::new("t", 1, 3)],
            timeout_ms: 1000,
            validate_only: false,
        },
        0,
    )
    .unwrap();
}

/// Answers each CreateTopics the core sends with the next of `answers`, moving time to each
/// retry; returns the time of the last answer.
fn answer_all(core: &mut AdminCore, answers: &[ErrorCode]) -> u64 {
    let mut now = 0u64;
    for &code in answers {
        let (addr, req) = next_request(core, &mut now);
        assert!(matches!(
            req.header.body,
            RequestBodyT::CreateTopicsRequest(_)
        ));
        core.on_response(
            &addr,
            respond(&req, created(code), bytes::Bytes::new()),
            now,
        );
    }
    now
}

#[test]
fn create_topics_is_resent_while_no_controller_is_active() {
    let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
    create(&mut core);
    let now = answer_all(
        &mut core,
        &[
            ErrorCode::NotController,
            ErrorCode::NotController,
            ErrorCode::None,
        ],
    );
    assert!(now > 0, "the resends waited their backoff");
    let results = core.take_results();
    let [(_, Ok(AdminOutcome::CreateTopics(topics)))] = results.as_slice() else {
        panic!("{results:?}")
    };
    assert_eq!(topics.len(), 1);
    assert!(topics[0].1.is_ok(), "{topics:?}");
}

#[test]
fn without_a_controller_until_the_bound_the_topic_reports_not_controller() {
    let config = AdminConfig {
        operation_timeout_ms: 150,
        retry_backoff_ms: 100,
        ..AdminConfig::default()
    };
    let mut core = AdminCore::new(config, vec!["boot:1".into()]).unwrap();
    create(&mut core);
    answer_all(&mut core, &[ErrorCode::NotController]);
    // One resend fits (100 ms < 150 ms); a second would not, so its answer is reported as it is.
    answer_all(&mut core, &[ErrorCode::NotController]);
    let results = core.take_results();
    let [(_, Ok(AdminOutcome::CreateTopics(topics)))] = results.as_slice() else {
        panic!("{results:?}")
    };
    assert_eq!(
        topics[0].1.as_ref().unwrap_err().error_code(),
        Some(ErrorCode::NotController)
    );
}

#[test]
fn a_topic_refused_for_another_reason_is_not_resent() {
    let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
    create(&mut core);
    answer_all(&mut core, &[ErrorCode::TopicAlreadyExists]);
    let results = core.take_results();
    let [(_, Ok(AdminOutcome::CreateTopics(topics)))] = results.as_slice() else {
        panic!("{results:?}")
    };
    assert_eq!(
        topics[0].1.as_ref().unwrap_err().error_code(),
        Some(ErrorCode::TopicAlreadyExists)
    );
}
