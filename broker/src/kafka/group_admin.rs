//! DeleteGroups (v0–2) and OffsetDelete (v0) on the Kafka front: each request translated into
//! [`crate::group_admin`]'s calls (the same ones the native front makes) and the answer
//! translated back. OffsetDelete's partitions are answered grouped by topic in the order the
//! request named them; a top-level error answers no partitions, as Kafka's coordinator does.

use std::rc::Rc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, GroupId, OffsetDeleteRequest, OffsetDeleteResponse,
    TopicName,
};
use spool_protocol::ErrorCode;

use super::kstr;
use crate::requests::TopicPartition;
use crate::shard::Shard;

pub async fn delete_groups(shard: &Rc<Shard>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let groups = req
        .groups_names
        .iter()
        .map(|g| g.0.as_str().to_owned())
        .collect();
    delete_groups_answer(crate::group_admin::delete_groups(shard, groups).await)
}

pub(super) fn delete_groups_answer(results: Vec<(String, ErrorCode)>) -> DeleteGroupsResponse {
    DeleteGroupsResponse::default().with_results(
        results
            .into_iter()
            .map(|(g, c)| {
                DeletableGroupResult::default()
                    .with_group_id(GroupId(kstr(g)))
                    .with_error_code(c as i16)
            })
            .collect(),
    )
}

pub async fn offset_delete(shard: &Rc<Shard>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let partitions = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.0.as_str(), p.partition_index))
        })
        .collect();
    let group = req.group_id.0.as_str().to_owned();
    offset_delete_answer(crate::group_admin::delete_offsets(shard, group, partitions).await)
}

pub(super) fn offset_delete_answer(
    result: Result<Vec<(TopicPartition, ErrorCode)>, ErrorCode>,
) -> OffsetDeleteResponse {
    let per = match result {
        Err(c) => return OffsetDeleteResponse::default().with_error_code(c as i16),
        Ok(per) => per,
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
    for (tp, c) in per {
        let part = OffsetDeleteResponsePartition::default()
            .with_partition_index(tp.partition)
            .with_error_code(c as i16);
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.partitions.push(part),
            None => topics.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(TopicName(kstr(tp.topic)))
                    .with_partitions(vec![part]),
            ),
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{ApiKey, ResponseKind};
    use spool_protocol::kafka::codec::{decode_response_body, encode_response, split_response};

    use super::*;

    fn round_trip(api_key: ApiKey, version: i16, body: ResponseKind) -> ResponseKind {
        let frame = encode_response(api_key, version, 5, &body).expect("encodes");
        let (cid, mut rest) =
            split_response(frame, api_key.response_header_version(version)).expect("frame");
        assert_eq!(cid, 5);
        let decoded = decode_response_body(api_key, version, &mut rest).expect("decodes");
        assert!(rest.is_empty(), "{api_key:?} v{version}: trailing bytes");
        decoded
    }

    #[test]
    fn delete_groups_answers_encode_at_every_listed_version() {
        for v in 0..=2 {
            let body = delete_groups_answer(vec![
                ("a".into(), ErrorCode::NonEmptyGroup),
                ("b".into(), ErrorCode::GroupIdNotFound),
            ]);
            let ResponseKind::DeleteGroups(d) = round_trip(ApiKey::DeleteGroups, v, body.into())
            else {
                panic!()
            };
            let got: Vec<(&str, i16)> = d
                .results
                .iter()
                .map(|r| (r.group_id.0.as_str(), r.error_code))
                .collect();
            assert_eq!(got, vec![("a", 68), ("b", 69)], "v{v}");
        }
    }

    #[test]
    fn offset_delete_answers_group_partitions_by_topic() {
        let body = offset_delete_answer(Ok(vec![
            (
                TopicPartition::new("t", 0),
                ErrorCode::GroupSubscribedToTopic,
            ),
            (TopicPartition::new("u", 1), ErrorCode::None),
            (
                TopicPartition::new("t", 2),
                ErrorCode::UnknownTopicOrPartition,
            ),
        ]));
        let ResponseKind::OffsetDelete(d) = round_trip(ApiKey::OffsetDelete, 0, body.into()) else {
            panic!()
        };
        assert_eq!(d.error_code, 0);
        let got: Vec<(&str, Vec<(i32, i16)>)> = d
            .topics
            .iter()
            .map(|t| {
                let ps = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
                    .collect();
                (t.name.0.as_str(), ps)
            })
            .collect();
        assert_eq!(got, vec![("t", vec![(0, 86), (2, 3)]), ("u", vec![(1, 0)])]);
        let body = offset_delete_answer(Err(ErrorCode::GroupIdNotFound));
        let ResponseKind::OffsetDelete(d) = round_trip(ApiKey::OffsetDelete, 0, body.into()) else {
            panic!()
        };
        assert_eq!((d.error_code, d.topics.len()), (69, 0));
    }
}
