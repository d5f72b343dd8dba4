//! Step 2 of an attempt: one bounded, ordered queue per channel of the plan. The build step
//! takes each queue's sending end for the upstream task and its receiving end for the
//! downstream one.

use std::collections::HashMap;
use tokio::sync::mpsc;
use weir_api::{ChannelId, StreamMessage};
use weir_plan::PartitionedPlan;

/// Both ends of every channel not yet handed to a task.
pub(super) struct Channels {
    senders: HashMap<ChannelId, mpsc::Sender<StreamMessage>>,
    receivers: HashMap<ChannelId, mpsc::Receiver<StreamMessage>>,
}

impl Channels {
    /// A queue of `capacity` messages (at least one) for every channel of `plan`.
    pub(super) fn open(plan: &PartitionedPlan, capacity: u32) -> Channels {
        let capacity = capacity.max(1) as usize;
        let mut senders = HashMap::new();
        let mut receivers = HashMap::new();
        for edge in &plan.edges {
            for ch in &edge.channels {
                let (tx, rx) = mpsc::channel(capacity);
                senders.insert(ch.clone(), tx);
                receivers.insert(ch.clone(), rx);
            }
        }
        Channels { senders, receivers }
    }

    /// The sending end of `channel`, for its upstream task (once).
    pub(super) fn take_sender(
        &mut self,
        channel: &ChannelId,
    ) -> Option<mpsc::Sender<StreamMessage>> {
        self.senders.remove(channel)
    }

    /// The receiving end of `channel`, for its downstream task (once).
    pub(super) fn take_receiver(
        &mut self,
        channel: &ChannelId,
    ) -> Option<mpsc::Receiver<StreamMessage>> {
        self.receivers.remove(channel)
    }
}
