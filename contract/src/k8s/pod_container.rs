//! Which container a `pods/exec` or `pods/log` request addresses, as kube-apiserver chooses
//! and refuses it (`streamLocation` and `LogLocation` in `pkg/registry/core/pod/strategy.go`):
//! the one named, which must be one of the pod's containers, init containers or ephemeral
//! containers; unnamed, the pod's only container. A refusal is the API server's 400 text.

use serde_json::Value;

/// Longest part of a requested container name quoted back in a refusal: a container name is a
/// DNS label, so nothing valid is cut.
const SHOWN_NAME_CHARS: usize = 63;

/// The names of a pod's containers, by kind, in the pod's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerNames<'a> {
    pub containers: Vec<&'a str>,
    pub init: Vec<&'a str>,
    pub ephemeral: Vec<&'a str>,
}

impl<'a> ContainerNames<'a> {
    /// The names in a pod given as JSON (`spec.containers`, `spec.initContainers`,
    /// `spec.ephemeralContainers`); a list that is missing or not a list has none.
    pub fn of(pod: &'a Value) -> Self {
        let names = |list: &str| -> Vec<&'a str> {
            pod.get("spec")
                .and_then(|spec| spec.get(list))
                .and_then(Value::as_array)
                .map(|cs| cs.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).collect())
                .unwrap_or_default()
        };
        Self { containers: names("containers"), init: names("initContainers"), ephemeral: names("ephemeralContainers") }
    }

    /// The container a request for `wanted` addresses in the pod `pod`, or the API server's
    /// refusal: unnamed in a pod without exactly one container, or named but none of its.
    pub fn addressed(&self, pod: &str, wanted: Option<&'a str>) -> Result<&'a str, String> {
        let Some(wanted) = wanted else {
            return match self.containers.as_slice() {
                [only] => Ok(only),
                [] => Err(format!("a container name must be specified for pod {pod}")),
                many => {
                    let mut message = format!(
                        "a container name must be specified for pod {pod}, choose one of: [{}]",
                        many.join(" ")
                    );
                    if !self.init.is_empty() {
                        message.push_str(&format!(" or one of the init containers: [{}]", self.init.join(" ")));
                    }
                    Err(message)
                }
            };
        };
        if [&self.containers, &self.init, &self.ephemeral].iter().any(|list| list.contains(&wanted)) {
            Ok(wanted)
        } else {
            let shown: String = wanted.chars().take(SHOWN_NAME_CHARS).collect();
            Err(format!("container {shown} is not valid for pod {pod}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_request_addresses_a_container_as_the_api_server_picks_it() {
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "init"}],
                                   "ephemeralContainers": [{"name": "debug"}]}});
        let names = ContainerNames::of(&pod);
        assert_eq!(names.addressed("p", Some("b")), Ok("b"));
        assert_eq!(names.addressed("p", Some("init")), Ok("init"));
        assert_eq!(names.addressed("p", Some("debug")), Ok("debug"));
        assert_eq!(names.addressed("p", Some("zz")), Err("container zz is not valid for pod p".to_string()));
        assert_eq!(
            names.addressed("p", None),
            Err("a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [init]"
                .to_string())
        );
        let one = json!({"spec": {"containers": [{"name": "only"}]}});
        assert_eq!(ContainerNames::of(&one).addressed("p", None), Ok("only"));
        let none = json!({"spec": {}});
        assert_eq!(
            ContainerNames::of(&none).addressed("p", None),
            Err("a container name must be specified for pod p".to_string())
        );
        let long = "x".repeat(100);
        let refused = ContainerNames::of(&one).addressed("p", Some(&long)).unwrap_err();
        assert_eq!(refused, format!("container {} is not valid for pod p", "x".repeat(63)));
    }
}
