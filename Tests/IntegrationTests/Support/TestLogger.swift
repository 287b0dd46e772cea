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

/// The warning and error lines a component logged (message and its `push.reason`), for tests that
/// check what an operator would see.
final class CapturedWarnings: Sendable {
    private let captured = Mutex<[String]>([])

    var lines: [String] { captured.withLock { $0 } }

    /// A logger whose warnings (and worse) land here.
    func logger(_ label: String) -> Logger { Logger(label: label) { _ in Handler(warnings: self) } }

    fileprivate func append(_ line: String) { captured.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let warnings: CapturedWarnings
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            guard event.level >= .warning else { return }
            let reason = event.metadata?["push.reason"].map { " reason=\($0)" } ?? ""
            warnings.append("\(event.message)\(reason)")
        }
    }
}
