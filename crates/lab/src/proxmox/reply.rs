//! A successful answer of the simulated API, shared by the dispatcher (`handlers`) and every
//! family of endpoints it dispatches to, so none of them needs the dispatcher.

use serde_json::Value;

use super::state::ApiFail;

/// A successful answer: `data`, and `total` for paged lists.
pub(super) struct Reply {
    pub data: Value,
    pub total: Option<usize>,
}

impl Reply {
    pub(super) fn data(data: Value) -> Result<Reply, ApiFail> {
        Ok(Reply { data, total: None })
    }
}
