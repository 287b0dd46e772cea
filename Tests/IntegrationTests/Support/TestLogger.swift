import Foundation
import Logging
import Synchronization

/// A logger for tests: silent unless `PUSHGATE_TEST_LOG` names a level (`debug`, `trace`...), then
/// it writes to stderr. Lets a hanging test be diagnosed without changing code.
enum TestLogger {
    static func make(_ label: String) -> Logger {
        guard let raw = ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"],
            let level = Logger.Level(rawValue: raw)
        else {
            return Logger(label: label, factory: { _ in SwiftLogNoOpLogHandler() })
        }
        var logger = Logger(label: label, factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = level
        return logger
    }
}

/// The lines a component logged, each as `render` writes it (nil: not kept), for tests that check what an
/// operator would see.
final class CapturedLog: Sendable {
    private let captured = Mutex<[String]>([])
    private let render: @Sendable (LogEvent) -> String?

    init(_ render: @escaping @Sendable (LogEvent) -> String?) { self.render = render }

    /// The warning and error lines (message and its `push.reason`).
    static func warnings() -> CapturedLog {
        CapturedLog { event in
            guard event.level >= .warning else { return nil }
            let reason = event.metadata?["push.reason"].map { " reason=\($0)" } ?? ""
            return "\(event.message)\(reason)"
        }
    }

    var lines: [String] { captured.withLock { $0 } }

    /// A logger whose lines (at info and worse) land here.
    func logger(_ label: String) -> Logger { Logger(label: label) { _ in Handler(log: self) } }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            guard let line = log.render(event) else { return }
            log.captured.withLock { $0.append(line) }
        }
    }
}
