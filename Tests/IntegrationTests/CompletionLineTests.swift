import Foundation
import Testing

@testable import PushgateDispatch

@Suite("The \"notification request done\" line's fields")
struct CompletionLineTests {
    @Test("the duration in seconds with three decimals, as printf's %.3f writes it")
    func duration() {
        for seconds in [0, 0.0004, 0.001, 0.0126, 0.999, 1, 1.5, 12.034, 59.9999, 3_600.25, 86_400.001] {
            #expect(Dispatcher.seconds(seconds) == String(format: "%.3f", seconds), "\(seconds)")
        }
        #expect(Dispatcher.seconds(-0.2) == "0.000", "a clock that stepped back reads as no time")
    }
}
