//! CREATE, CREATE2 and SELFDESTRUCT that note, on the executing thread,
//! that they ran: after such a transaction the one journal settles
//! (`journal/mod.rs`), since what it created or destroyed must not be seen
//! by a later transaction through the journal.
//!
//! Noting the instruction rather than its effect over-approximates (a
//! CREATE that fails for lack of funds, a SELFDESTRUCT of an old contract,
//! which only moves its balance, also settle), which costs a settle, never
//! exactness. Every other instruction is revm's, untouched.

use std::cell::Cell;

use revm::{
    context_interface::Host,
    interpreter::{
        instructions::{contract, host},
        interpreter::EthInterpreter,
        Instruction, InstructionContext, InstructionExecResult,
    },
};

thread_local! {
    static RAN: Cell<bool> = const { Cell::new(false) };
}

/// Whether a watched instruction ran on this thread since the last call.
pub(crate) fn took_place() -> bool {
    RAN.with(Cell::take)
}

fn note() {
    RAN.with(|ran| ran.set(true));
}

fn create<H: Host + ?Sized>(context: InstructionContext<'_, H, EthInterpreter>) -> InstructionExecResult {
    note();
    contract::create::<false, EthInterpreter, H>(context)
}

fn create2<H: Host + ?Sized>(context: InstructionContext<'_, H, EthInterpreter>) -> InstructionExecResult {
    note();
    contract::create::<true, EthInterpreter, H>(context)
}

fn selfdestruct<H: Host + ?Sized>(
    context: InstructionContext<'_, H, EthInterpreter>,
) -> InstructionExecResult {
    note();
    host::selfdestruct::<EthInterpreter, H>(context)
}

/// Installs the noting instructions in an EVM's instruction table (gas
/// stays revm's: only the functions are replaced).
pub(crate) fn install<H: Host>(
    instructions: &mut revm::handler::instructions::EthInstructions<EthInterpreter, H>,
) {
    let table = instructions.instruction_table_mut();
    table[0xf0] = Instruction::new(create::<H>);
    table[0xf5] = Instruction::new(create2::<H>);
    table[0xff] = Instruction::new(selfdestruct::<H>);
}
