//! gRPC's health checking protocol (`grpc.health.v1.Health/Check`), served by every built-in
//! server: what Kubernetes probes, load balancers and fortio's gRPC load (`fortio load -grpc`,
//! which calls nothing else) ask. Each Check is counted as a served call, so a harness reading
//! `grpclab.admin.v1.Stats/Get` sees a health-check load like any other.
//!
//! `Watch` (a server stream of status changes) is not served: nothing here ever changes
//! status, and no load tool drives it.

use grpclab_core::Code;
pub use tonic_health::pb::{
    health_check_response::ServingStatus, HealthCheckRequest, HealthCheckResponse,
};

/// The `:path` of the health check.
pub const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// The services a Check may name (besides `""`, the server as a whole).
pub const SERVICES: &[&str] = &[
    "helloworld.Greeter",
    "grpclab.streaming.v1.StreamingEcho",
    "grpclab.session.v1.Sessions",
    "grpclab.admin.v1.Stats",
    "grpclab.admin.v1.HeapProfile",
    "grpc.health.v1.Health",
];

/// The answer to a Check for `service`: SERVING for the server (`""`) and each of
/// [`SERVICES`]; NOT_FOUND with a message for any other name, as the protocol says.
pub fn check(service: &str) -> Result<HealthCheckResponse, (Code, String)> {
    if service.is_empty() || SERVICES.contains(&service) {
        Ok(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        })
    } else {
        Err((
            Code::NotFound,
            format!(
                "unknown service {service:?}; this server reports on \"\" (the server) and {}",
                SERVICES.join(", ")
            ),
        ))
    }
}
