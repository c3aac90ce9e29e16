//! Label and field selectors, in the query-string syntax (`app=web,tier!=db,env in (a,b)`,
//! `spec.nodeName=n1`) and in the `LabelSelector` object form (`matchLabels`,
//! `matchExpressions`) that Deployments, ReplicaSets and PodDisruptionBudgets carry.

use serde_json::Value;

use super::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the query-string form.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_term(term)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Reads a `LabelSelector` object (`matchLabels`, `matchExpressions`). A missing selector
    /// (`Value::Null`) selects nothing, as for a PDB without one.
    pub fn from_object(selector: &Value) -> Option<Self> {
        let object = selector.as_object()?;
        let mut requirements = Vec::new();
        if let Some(labels) = object.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                requirements.push(Requirement::Equals(
                    key.clone(),
                    value.as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
        for expression in object
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expression["key"].as_str().unwrap_or_default().to_owned();
            let values: Vec<String> = expression["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            requirements.push(match expression["operator"].as_str() {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::DoesNotExist(key),
                _ => return None,
            });
        }
        Some(LabelSelector { requirements })
    }

    /// Whether an object with `labels` (a JSON map, or null) matches.
    pub fn matches(&self, labels: &Value) -> bool {
        let get = |key: &str| labels.get(key).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
                Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
                Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
                Requirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
                Requirement::Exists(k) => get(k).is_some(),
                Requirement::DoesNotExist(k) => get(k).is_none(),
            })
    }
}

/// Splits on commas outside parentheses (`a in (x,y),b` is two terms).
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn parse_term(term: &str) -> Result<Requirement, ApiError> {
    let invalid = || ApiError::bad_request(format!("unable to parse requirement: {term}"));
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key.trim().to_owned()));
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            key.trim().into(),
            value.trim().into(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::Equals(key.trim().into(), value.trim().into()));
    }
    for (operator, not) in [(" notin ", true), (" in ", false)] {
        if let Some((key, rest)) = term.split_once(operator) {
            let list = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(invalid)?;
            let values = list.split(',').map(|v| v.trim().to_owned()).collect();
            let key = key.trim().to_owned();
            return Ok(if not {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    if term.contains(char::is_whitespace) {
        return Err(invalid());
    }
    Ok(Requirement::Exists(term.to_owned()))
}

/// A parsed field selector: `path=value` and `path!=value` terms over the object's fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector {
    terms: Vec<(Vec<String>, String, bool)>,
}

impl FieldSelector {
    /// Parses `spec.nodeName=n1,metadata.name!=x`.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, value, equal) = if let Some((p, v)) = term.split_once("!=") {
                (p, v, false)
            } else if let Some((p, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (p, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term}"
                )));
            };
            let path = path.trim().split('.').map(str::to_owned).collect();
            terms.push((path, value.trim().to_owned(), equal));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether `object` matches. A missing field reads as the empty string, as on the real
    /// server for fields like an unscheduled pod's `spec.nodeName`.
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(path, value, equal)| {
            let mut field = object;
            for part in path {
                field = &field[part.as_str()];
            }
            let text = match field {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (text == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_cover_the_query_syntax() {
        let labels = json!({"app": "web", "tier": "front"});
        let matches = |s: &str| LabelSelector::parse(s).expect(s).matches(&labels);
        assert!(matches("app=web"));
        assert!(matches("app==web,tier!=db"));
        assert!(matches("app in (api, web),tier"));
        assert!(!matches("app notin (web),tier"));
        assert!(matches("!missing"));
        assert!(!matches("app=api"));
        assert!(matches(""));
    }

    #[test]
    fn label_selector_objects_match_like_the_query_form() {
        let selector = LabelSelector::from_object(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}],
        }))
        .expect("selector");
        assert!(selector.matches(&json!({"app": "web", "tier": "front"})));
        assert!(!selector.matches(&json!({"app": "web"})));
        assert!(LabelSelector::from_object(&Value::Null).is_none());
    }

    #[test]
    fn field_selectors_read_nested_fields() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
        let matches = |s: &str| FieldSelector::parse(s).expect(s).matches(&pod);
        assert!(matches("spec.nodeName=n1"));
        assert!(matches("spec.nodeName=n1,metadata.name=p"));
        assert!(!matches("spec.nodeName!=n1"));
        assert!(matches("status.phase="));
    }
}
