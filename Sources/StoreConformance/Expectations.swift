import PushgateCore

func expect(
    _ condition: Bool,
    _ message: @autoclosure () -> String,
    file: StaticString = #fileID,
    line: UInt = #line
) throws {
    guard condition else { throw ConformanceFailure(file: "\(file)", line: Int(line), message: message()) }
}

func expectEqual<T: Equatable>(
    _ actual: T,
    _ expected: T,
    _ what: String,
    file: StaticString = #fileID,
    line: UInt = #line
) throws {
    guard actual == expected else {
        throw ConformanceFailure(
            file: "\(file)",
            line: Int(line),
            message: "\(what): expected \(expected), got \(actual)"
        )
    }
}

func unwrap<T>(_ value: T?, _ what: String, file: StaticString = #fileID, line: UInt = #line) throws -> T {
    guard let value else { throw ConformanceFailure(file: "\(file)", line: Int(line), message: "\(what): got nil") }
    return value
}

/// Expects `body` to throw a ``StoreError`` with `code`.
func expectStoreError(
    _ code: StoreError.Code,
    _ what: String,
    file: StaticString = #fileID,
    line: UInt = #line,
    _ body: () async throws -> Void
) async throws {
    do {
        try await body()
    } catch let error as StoreError {
        try expectEqual(error.code, code, "\(what): error code", file: file, line: line)
        return
    } catch {
        throw ConformanceFailure(
            file: "\(file)",
            line: Int(line),
            message: "\(what): expected StoreError \(code), got \(error)"
        )
    }
    throw ConformanceFailure(
        file: "\(file)",
        line: Int(line),
        message: "\(what): expected StoreError \(code), got success"
    )
}
