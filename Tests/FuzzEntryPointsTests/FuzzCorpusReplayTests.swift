import Foundation
import FuzzEntryPoints
import Testing

/// Every input in `Tests/FuzzCorpus/TARGET/` (the fuzzer's minimised corpus, its seeds and the inputs
/// that once broke an invariant) still keeps every invariant of its target (`FuzzTarget`).
@Suite("Fuzz corpus replay")
struct FuzzCorpusReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FuzzCorpus")

    static func inputs(of target: FuzzTarget) throws -> [URL] {
        let folder = corpus.appendingPathComponent(target.rawValue)
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test("every committed input keeps the target's invariants", arguments: FuzzTarget.allCases)
    func replay(target: FuzzTarget) async throws {
        let inputs = try Self.inputs(of: target)
        #expect(!inputs.isEmpty, "no corpus for \(target.rawValue)")
        // On a Dispatch thread, as libFuzzer calls from a plain thread: `http-path` waits there for the
        // router's async work, which must not wait for a cooperative thread this test holds.
        let violations: [String] = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        var violations: [String] = []
                        for url in inputs {
                            let bytes = try [UInt8](Data(contentsOf: url))
                            do { try target.run(bytes) } catch {
                                violations.append("\(target.rawValue)/\(url.lastPathComponent): \(error)")
                            }
                        }
                        return violations
                    }
                )
            }
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }
}
