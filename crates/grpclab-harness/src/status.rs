//! gRPC statuses as workload files name them, for a flow step's `expect.status` and a
//! policy's status lists (`retryableStatusCodes`, `nonFatalStatusCodes`).

use grpclab_core::Code;

/// A gRPC status as a workload file names it: the spec's name (`NOT_FOUND`), ghz's
/// (`NotFound`), either in any case, or its code (0 to 16).
pub(crate) fn status_named(value: &toml::Value) -> Option<Code> {
    match value {
        toml::Value::String(name) => {
            let wanted = name.replace('_', "").to_ascii_lowercase();
            Code::ALL
                .iter()
                .copied()
                .find(|code| code.name().to_ascii_lowercase() == wanted)
        }
        toml::Value::Integer(number) => u32::try_from(*number)
            .ok()
            .filter(|n| *n <= 16)
            .map(Code::from_u32),
        _ => None,
    }
}
