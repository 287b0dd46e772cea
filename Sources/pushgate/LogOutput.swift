import Foundation
import Logging
import PushgateCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's log file (`-o`), opened with O_APPEND so that every logger's lines land whole and in
/// order, whoever else appends to the file. ``reopen()`` (on SIGHUP) opens the path again, so that after
/// logrotate has moved the file away the daemon writes to a new one instead of the renamed one for ever.
final class LogFile: Sendable {
    let path: String
    private let descriptor: Mutex<Int32>

    init?(path: String) {
        let fd = Self.open(path)
        guard fd >= 0 else { return nil }
        self.path = path
        descriptor = Mutex(fd)
    }

    private static func open(_ path: String) -> Int32 {
        Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
    }

    func append(_ line: String) {
        let bytes = Array(line.utf8)
        // Under the lock, so that a reopen never closes the descriptor a write is using.
        descriptor.withLock { fd in
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
    }

    /// Opens the path again and writes there from now on; keeps the old file (and says why) if it
    /// cannot. Nil on success.
    func reopen() -> String? {
        let fresh = Self.open(path)
        guard fresh >= 0 else { return String(cString: strerror(errno)) }
        let old = descriptor.withLock { fd in
            defer { fd = fresh }
            return fd
        }
        close(old)
        return nil
    }

    deinit { _ = descriptor.withLock { close($0) } }
}

/// Where log lines go and how they look: `text` (the readable line) or `json` (one object a line with the
/// same fields: time, level, label, message, source, and each metadata key as a field of its own).
struct LogOutput {
    enum Format: String { case text, json }

    let format: Format
    let level: Logger.Level
    /// The file when detached; nil: standard error.
    let file: LogFile?

    func handler(label: String) -> any LogHandler {
        var handler: any LogHandler
        switch (format, file) {
        // Standard error gets the same lines as the file (one write each): swift-log's StreamLogHandler
        // formats its time with `strftime` in the local time zone, which cost more than the rest of a
        // "notification request done" line.
        case (.text, nil): handler = LineLogHandler(label: label, render: Self.textLine, write: Self.writeStandardError)
        case (.text, let file?): handler = LineLogHandler(label: label, render: Self.textLine) { file.append($0) }
        case (.json, let file?): handler = LineLogHandler(label: label, render: Self.jsonLine) { file.append($0) }
        case (.json, nil): handler = LineLogHandler(label: label, render: Self.jsonLine, write: Self.writeStandardError)
        }
        handler.logLevel = level
        return handler
    }

    static func textLine(_ label: String, _ event: LogEvent, _ metadata: Logger.Metadata) -> String {
        // One string appended to, not a string per field joined: every "request done" line comes here.
        var line = LogTimestamp.string(Date(), milliseconds: false)
        // Grown once: appended field by field, a "request done" line was copied into larger storage 4-5 times.
        line.reserveCapacity(320)
        line += " \(event.level) " + label + ":"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line += " " + key + "=" + value.description
        }
        line += " \(event.message)\n"
        return line
    }

    /// One line to standard error in one `write`, so that lines of several threads never interleave.
    @Sendable static func writeStandardError(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var rest = UnsafeRawBufferPointer(bytes)
            while !rest.isEmpty {
                let written = write(2, rest.baseAddress, rest.count)
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                rest = UnsafeRawBufferPointer(rebasing: rest[written...])
            }
        }
    }

    static let fixedFields: Set<String> = ["time", "level", "label", "message", "source"]

    static func jsonLine(_ label: String, _ event: LogEvent, _ metadata: Logger.Metadata) -> String {
        let time = LogTimestamp.string(Date(), milliseconds: true)
        var line = "{\"time\":\(JSONText.string(time)),\"level\":\(JSONText.string(event.level.rawValue))"
        line += ",\"label\":\(JSONText.string(label)),\"message\":\(JSONText.string("\(event.message)"))"
        line += ",\"source\":\(JSONText.string(event.source))"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            // A metadata key named like a fixed field keeps both: the field, and `metadata.KEY`.
            let name = fixedFields.contains(key) ? "metadata." + key : key
            line += ",\(JSONText.string(name)):\(JSONText.value(value))"
        }
        return line + "}\n"
    }
}

/// JSON text for log lines, written by hand: keys in a fixed order and no Foundation round trip per line.
enum JSONText {
    static func string(_ text: String) -> String { Payload.jsonStringLiteral(text) }

    static func value(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let text): string(text)
        case .stringConvertible(let convertible): string(convertible.description)
        case .array(let values): "[" + values.map(Self.value).joined(separator: ",") + "]"
        case .dictionary(let entries):
            "{"
                + entries.sorted { $0.key < $1.key }.map { "\(string($0.key)):\(Self.value($0.value))" }
                .joined(separator: ",") + "}"
        }
    }
}

/// A handler that renders each event to one line and hands it to `write`.
struct LineLogHandler: LogHandler {
    typealias Render = @Sendable (String, LogEvent, Logger.Metadata) -> String
    private let label: String
    private let render: Render
    private let write: @Sendable (String) -> Void
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String, render: @escaping Render, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.render = render
        self.write = write
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // Without metadata of the handler's own (the usual case), the event's is the line's: no merge.
        guard let extra = event.metadata, !extra.isEmpty else { return write(render(label, event, metadata)) }
        if metadata.isEmpty { return write(render(label, event, extra)) }
        write(render(label, event, metadata.merging(extra) { $1 }))
    }
}
