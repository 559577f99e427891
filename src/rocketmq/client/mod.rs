//! RocketMQ's clients as the workload runs them: the producer application on
//! `DefaultMQProducer`, the group's members on `DefaultMQPushConsumer`, and the final
//! read.

pub mod consumer;
pub mod final_read;
pub mod producer;

use crate::rocketmq::remoting::{Client, Request, Response, TopicRoute};
use crate::types::HostName;
use std::time::Duration;

/// How long a route request waits for the NameServer.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(3);

/// `updateTopicRouteInfoFromNameServer`: the topic's route, or `None` when the NameServer
/// did not answer or knows no broker of it (the caller keeps the route it had).
async fn fetch_route(client: &Client, topic: &str) -> Option<TopicRoute> {
    let request = Request::GetRouteInfoByTopic {
        topic: topic.to_owned(),
    };
    match client
        .invoke(HostName::NameServer, request, ROUTE_TIMEOUT)
        .await
    {
        Ok(Response::Route(route)) => route,
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, "route refresh failed");
            None
        }
    }
}
