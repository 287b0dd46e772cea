/// The fuzz targets: one function per parser family, each taking any bytes and checking the
/// parser's invariants (no trap, and the round trips and consistency rules each target names).
///
/// `scripts/fuzz.sh NAME SECONDS` runs one under libFuzzer (the `pushgate-fuzz` executable);
/// `FuzzCorpusReplayTests` replays the committed corpus (`Tests/FuzzCorpus/NAME/`) through the same
/// functions in `swift test`, so a corpus entry that once crashed stays a regression test.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// The strict JSON reader, and the notification and registration datagram rules on the same bytes.
    case json
    /// `POST /v1/notifications` bodies with and without an app-scoped API key, and the bearer header.
    case httpBody = "http-body"
    /// Request paths, methods and keys through the API's router and guards: nothing unauthorised or
    /// non-canonical reaches a handler.
    case httpPath = "http-path"
    /// The three legacy binary decoders (notifications, error responses, feedback tuples).
    case legacy
    /// `HTTP2FrameParser`.
    case http2Frames = "http2-frames"
    /// `HPACKAnswerReader` against NIOHPACK's decoder.
    case hpackAnswer = "hpack-answer"

    /// Runs the target on one input; throws the first invariant the input breaks.
    package func run(_ input: UnsafeRawBufferPointer) throws(FuzzViolation) {
        switch self {
        case .json: try JSONFuzz.run(input)
        case .httpBody: try HTTPBodyFuzz.run(input)
        case .httpPath: try HTTPPathFuzz.run(input)
        case .legacy: try LegacyFuzz.run(input)
        case .http2Frames: try HTTP2FramesFuzz.run(input)
        case .hpackAnswer: try HPACKAnswerFuzz.run(input)
        }
    }

    package func run(_ input: [UInt8]) throws(FuzzViolation) {
        let result: Result<Void, FuzzViolation> = input.withUnsafeBytes { raw in
            do throws(FuzzViolation) { return .success(try run(raw)) } catch { return .failure(error) }
        }
        try result.get()
    }
}

/// An invariant an input broke: the target, what was expected, and what happened.
package struct FuzzViolation: Error, CustomStringConvertible {
    package var target: FuzzTarget
    package var message: String

    package var description: String { "\(target.rawValue): \(message)" }
}

/// Checks one invariant of `target`.
func expect(
    _ condition: Bool,
    _ target: FuzzTarget,
    _ message: @autoclosure () -> String
) throws(FuzzViolation) {
    if !condition { throw FuzzViolation(target: target, message: message()) }
}
