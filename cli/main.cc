// trainsim: a discrete-event simulator of distributed Transformer training (cli/app.h).

#include "cli/app.h"

int main(int argc, char** argv) { return trainsim::cli::run_app(argc, argv); }
