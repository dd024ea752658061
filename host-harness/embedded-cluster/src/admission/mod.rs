//! Admission: the plugins of kube-apiserver that a namespace's policy objects switch on, run
//! inside the create's transaction so that what they read and what they write is atomic with
//! the object itself (the real quota plugin gets the same effect with compare-and-swap on the
//! quota's status).
//!
//! - [`limit_ranger`]: a LimitRange's container defaults are applied to a new pod before it is
//!   validated, and its min/max are enforced after (403, as the `LimitRanger` plugin answers);
//! - [`pod_security`]: a namespace's `pod-security.kubernetes.io/enforce` level refuses pods
//!   that fail it (403) and its `warn` level warns about pods and pod templates (`PodSecurity`);
//! - [`quota`]: a ResourceQuota's `hard` limits are enforced on creates (403 "exceeded quota"),
//!   and its `status` is kept current on every create and removal in the namespace, and on
//!   updates of pods, claims and quotas (the work kube-controller-manager's quota controller does).

pub mod limit_ranger;
pub mod pod_security;
pub mod quota;
