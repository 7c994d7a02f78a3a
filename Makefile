# memtrack: thin front door over CMake. See README.md.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
MT_WERROR  ?= OFF
MT_SANITIZE ?=
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
CTEST_ARGS ?=

.PHONY: all build configure test demo bench install clean deps

all: build

deps:
	./scripts/deps.sh

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DMT_WERROR=$(MT_WERROR) \
	      -DMT_SANITIZE="$(MT_SANITIZE)" $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# All tests, with CTest's summary at the end.
test: deps
	$(MAKE) build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) $(CTEST_ARGS)

# The main job: see scripts/demo.sh.
demo: deps
	$(MAKE) build
	./scripts/demo.sh $(BUILD)

bench: build
	$(BUILD)/bin/memtrack bench all

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-*
