/// Errors of the simulator: bad configuration, bad fault settings, bad control requests, start-up
/// failures. Equality is on the code; `description` never contains key material.
public struct SimulatorError: Error, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: Hashable {
        case invalidConfiguration(key: String, problem: String)
        case invalidFaults(key: String, problem: String)
        case invalidControlRequest(problem: String)
        case notRunning
    }

    private let code: Code

    private init(_ code: Code) {
        self.code = code
    }

    /// A configuration value is unusable; `key` names it (a property or a CLI flag).
    public static func invalidConfiguration(key: String, problem: String) -> SimulatorError {
        .init(.invalidConfiguration(key: key, problem: problem))
    }

    /// A fault setting is out of range; `key` is the control API's key.
    public static func invalidFaults(key: String, problem: String) -> SimulatorError {
        .init(.invalidFaults(key: key, problem: problem))
    }

    static func invalidControlRequest(_ problem: String) -> SimulatorError {
        .init(.invalidControlRequest(problem: problem))
    }

    public var description: String {
        switch self.code {
        case .invalidConfiguration(let key, let problem): return "invalid simulator configuration: \(key): \(problem)"
        case .invalidFaults(let key, let problem): return "invalid fault \(key): \(problem)"
        case .invalidControlRequest(let problem): return "invalid control request: \(problem)"
        case .notRunning: return "the simulator is not running"
        }
    }

    public var debugDescription: String { self.description }
}
