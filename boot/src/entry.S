/*
 * Two entries, one trampoline. Both loaders enter in 32-bit protected mode with
 * paging off:
 *  - PVH: QEMU (`-kernel`, PVH ELF note), %ebx pointing at hvm_start_info;
 *  - Multiboot2: GRUB (the ISO), %eax = 0x36d76289, %ebx pointing at the
 *    Multiboot2 information, no stack and a GDT of its own.
 * The trampoline identity-maps the first 4 GiB with 2 MiB pages, enters long
 * mode and calls `boot_rust_entry(info_paddr, loader_magic)`, magic 0 for PVH.
 * The kernel builds its real page tables later.
 */

    /* Multiboot2 header: within the first 32 KiB of the file, 8-byte aligned. */
    .section .multiboot2, "a"
    .p2align 3
mb2_header:
    .long 0xe85250d6                    /* magic */
    .long 0                             /* architecture: i386 protected mode */
    .long mb2_header_end - mb2_header
    .long -(0xe85250d6 + 0 + (mb2_header_end - mb2_header))
    /* Entry address tag: GRUB jumps to mb2_start, not the ELF entry. */
    .p2align 3
    .word 3, 0
    .long 12
    .long mb2_start
    .p2align 3
    .word 0, 0                          /* end tag */
    .long 8
mb2_header_end:

    .section .note.Xen, "a", @note
    .p2align 2
    .long 4                 /* name size: "Xen\0" */
    .long 8                 /* descriptor size */
    .long 18                /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .p2align 2
    .quad pvh_start
    .p2align 2

    .section .text.boot, "ax"
    .code32
    .global pvh_start
pvh_start:
    cli
    cld
    movl %ebx, %esi                     /* keep start_info across the set-up */
    xorl %ebp, %ebp                     /* loader magic 0: PVH */
    jmp common_start

    .global mb2_start
mb2_start:
    cli
    cld
    movl %ebx, %esi                     /* the Multiboot2 information */
    movl %eax, %ebp                     /* the magic, checked in Rust */

common_start:

    /* Zero .bss ourselves: the page tables and stack below rely on it. */
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    xorl %eax, %eax
    rep stosb

    movl $boot_stack_top, %esp

    /* PML4[0] -> PDPT; PDPT[0..4] -> four page directories. */
    movl $boot_pdpt, %eax
    orl $0x3, %eax
    movl %eax, boot_pml4
    movl $boot_pd, %eax
    orl $0x3, %eax
    xorl %ecx, %ecx
1:  movl %eax, boot_pdpt(,%ecx,8)
    addl $0x1000, %eax
    incl %ecx
    cmpl $4, %ecx
    jne 1b

    /* 2048 present, writable, 2 MiB pages: identity map of [0, 4 GiB). */
    movl $0x83, %eax
    xorl %ecx, %ecx
2:  movl %eax, boot_pd(,%ecx,8)
    addl $0x200000, %eax
    incl %ecx
    cmpl $2048, %ecx
    jne 2b

    movl $boot_pml4, %eax
    movl %eax, %cr3
    movl %cr4, %eax
    orl $(1 << 5), %eax                 /* PAE */
    movl %eax, %cr4
    movl $0xC0000080, %ecx              /* EFER */
    rdmsr
    orl $((1 << 8) | (1 << 11)), %eax   /* LME | NXE */
    wrmsr
    movl %cr0, %eax
    orl $((1 << 31) | (1 << 16) | 1), %eax  /* PG | WP | PE */
    movl %eax, %cr0

    lgdt boot_gdt_ptr
    ljmp $0x08, $long_mode_entry

    .code64
long_mode_entry:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movq $boot_stack_top, %rsp
    movl %esi, %edi                     /* argument 1: information physical address */
    movl %ebp, %esi                     /* argument 2: loader magic */
    xorq %rbp, %rbp
    call boot_rust_entry
3:  hlt
    jmp 3b

    .section .rodata.boot, "a"
    .p2align 3
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff            /* 0x08: 64-bit code */
    .quad 0x00cf92000000ffff            /* 0x10: data */
boot_gdt_ptr:
    .word boot_gdt_ptr - boot_gdt - 1
    .long boot_gdt

    .section .bss.boot, "aw", @nobits
    .p2align 12
boot_pml4:
    .skip 4096
boot_pdpt:
    .skip 4096
boot_pd:
    .skip 4096 * 4
    .global boot_stack_bottom
boot_stack_bottom:
    .skip 128 * 1024
    .global boot_stack_top
boot_stack_top:
